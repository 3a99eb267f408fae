"""Secret detection for checkpoints and evidence: a checkpoint is evidence, never a vault.

Checkpoints end up in reports, agent prompts (the recovery packet) and review pages; a
credential written there leaks to everyone who can read a job. We refuse rather than redact
on write, so the caller learns about it, and redact on read paths that summarise requests.
"""

import re

SECRET_KEY = re.compile(
    r"(^|[_\-.])(pass(word|wd)?|secret|token|api[_\-]?key|apikey|authorization|auth[_\-]?header|"
    r"credentials?|private[_\-]?key|app[_\-]?password|client[_\-]?secret|cookie|session[_\-]?key)($|[_\-.])",
    re.IGNORECASE,
)
ALLOWED_KEYS = {"fencing_token", "max_tokens", "token_count", "prompt_tokens", "completion_tokens",
                "total_tokens", "input_tokens", "output_tokens"}
SECRET_VALUES = [
    re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}", re.IGNORECASE),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"\bdl_[A-Za-z0-9_\-]{20,}"),
    re.compile(r"\b(ghp|gho|github_pat)_[A-Za-z0-9_]{20,}"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\b[A-Za-z0-9]{4}( [A-Za-z0-9]{4}){5}\b"),  # WordPress application password
    re.compile(r"://[^/\s:@]+:[^/\s@]+@"),  # credentials inside a URL
]


def find_secrets(value, path="$"):
    """Yield (json_path, why) for every key or string that looks like a credential."""
    if isinstance(value, dict):
        for k, v in value.items():
            sub = f"{path}.{k}"
            if isinstance(k, str) and k.lower() not in ALLOWED_KEYS and SECRET_KEY.search(k):
                if v not in (None, "", False):
                    yield sub, "key looks like a credential"
                    continue
            yield from find_secrets(v, sub)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from find_secrets(v, f"{path}[{i}]")
    elif isinstance(value, str):
        for pattern in SECRET_VALUES:
            if pattern.search(value):
                yield path, "value looks like a credential"
                break


def redact(value):
    if isinstance(value, dict):
        return {k: ("***" if isinstance(k, str) and k.lower() not in ALLOWED_KEYS and SECRET_KEY.search(k)
                    else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, str) and any(p.search(value) for p in SECRET_VALUES):
        return "***"
    return value
