"""Real prose the project did not write, for the secret rules' false-positive test.

Each source yields sentences and headings (wrapped lines joined, paragraphs split at sentence
ends). Two are part of every Python (always there); two come with the stack that `make test`
prepares before the suites run, found through the same locations the stack uses:

    python_docs      the Python reference's topics (pydoc_data) and the stdlib's docstrings
    debian_docs      /usr/share/doc: Debian changelogs, READMEs, NEWS (on every Debian machine)
    wordpress        WordPress core's translatable strings (__(), _e(), esc_html__()...) under
                     /usr/share/wordpress (`make deps`, stack/system-packages.sh; stack/wordpress.py)
    n8n              n8n's own node names and descriptions (displayName, description, hint...) in
                     $DURABLE_CACHE/n8n-<version> (`make prepare`, stack/n8n.sh)
"""

import ast
import gzip
import os
import re
import sysconfig
from pathlib import Path

WP_ROOT = Path("/usr/share/wordpress")
N8N_VERSION = os.environ.get("N8N_VERSION", "2.40.7")
CACHE = Path(os.environ.get("DURABLE_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
             / "durable-steps")
N8N_NODES = CACHE / f"n8n-{N8N_VERSION}" / "node_modules" / "n8n-nodes-base" / "dist"

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")
_SPACES = re.compile(r"\s+")


def sentences(text, limit=400):
    """Paragraphs of ``text`` with wrapped lines joined, cut at sentence ends; long runs cut at
    ``limit`` characters (on a space) so one item stays a sentence or a heading."""
    for para in re.split(r"\n\s*\n", text):
        para = _SPACES.sub(" ", para).strip()
        for s in _SENTENCE_END.split(para):
            while len(s) > limit:
                cut = s.rfind(" ", 0, limit)
                cut = cut if cut > 0 else limit
                yield s[:cut]
                s = s[cut:].lstrip()
            if len(s) >= 12:
                yield s


def spread(seq, n):
    """``n`` elements of ``seq`` spread evenly over it (all of it when ``n`` is None or larger)."""
    seq = list(seq)
    if n is None or len(seq) <= n:
        return seq
    return [seq[i * len(seq) // n] for i in range(n)]


def python_docs(files=None):
    from pydoc_data.topics import topics

    for text in topics.values():
        yield from sentences(text)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    modules = [p for p in sorted(stdlib.glob("*.py")) + sorted(stdlib.glob("[a-z]*/*.py"))
               if not re.match(r"test|idlelib|site-packages", p.relative_to(stdlib).parts[0])]
    for path in spread(modules, files):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    yield from sentences(doc)


def debian_docs(files=None, root=Path("/usr/share/doc")):
    names = re.compile(r"^(?:changelog\.Debian|NEWS\.Debian|README(?:\.Debian|\.md|\.txt)?|NEWS(?:\.md)?)(?:\.gz)?$")
    for path in spread([p for p in sorted(root.glob("*/*")) if names.match(p.name) and p.is_file()], files):
        try:
            raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        except (OSError, EOFError):
            continue
        yield from sentences(raw.decode("utf-8", "replace"))


_GETTEXT = re.compile(r"\b(?:__|_e|_x|_ex|_n|_nx|esc_html__|esc_html_e|esc_attr__|esc_attr_e|esc_html_x)"
                      r"\(\s*'((?:[^'\\]|\\.){12,})'")
_TAGS = re.compile(r"<[^>]+>")


def wordpress(files=None, root=WP_ROOT):
    for path in spread(sorted(root.glob("**/*.php")), files):
        for m in _GETTEXT.finditer(path.read_text(encoding="utf-8", errors="replace")):
            yield from sentences(_TAGS.sub(" ", m.group(1).replace("\\'", "'")))


_N8N_TEXT = re.compile(r"\b(?:displayName|description|hint|placeholder|subtitle|action|notice)"
                       r":\s*(?:'((?:[^'\\]|\\.){12,})'|\"((?:[^\"\\]|\\.){12,})\"|`([^`$\\]{12,})`)")


def n8n(files=None, root=N8N_NODES):
    for path in spread(sorted(root.glob("nodes/**/*.js")) + sorted(root.glob("credentials/*.js")), files):
        for m in _N8N_TEXT.finditer(path.read_text(encoding="utf-8", errors="replace")):
            text = next(g for g in m.groups() if g is not None)
            yield from sentences(_TAGS.sub(" ", text.replace("\\'", "'").replace('\\"', '"')))


def present():
    """Which of the stack's sources this machine has: {name: (present, where)}."""
    return {"wordpress": ((WP_ROOT / "wp-includes").is_dir(), WP_ROOT),
            "n8n": ((N8N_NODES / "nodes").is_dir(), N8N_NODES)}


SOURCES = {"python_docs": python_docs, "debian_docs": debian_docs, "wordpress": wordpress, "n8n": n8n}


def corpus(names=SOURCES, files=None, items=None):
    """{source: its unique items}: from ``files`` of its files spread over all of them, and then
    ``items`` of those spread over them (None: everything)."""
    return {name: spread(sorted(set(SOURCES[name](files))), items) for name in names}
