"""docs/agent-frameworks.md's examples, run as written: every fenced block with ``title="NAME"`` is
written to NAME in a directory of its own and run unchanged in a process, against `durable-ledger
serve`, the refunds API (remote.py, counting writes) and, for the Agents SDK, a scripted
Responses API reached through the OpenAI client's own OPENAI_BASE_URL. Approvals are given in
the console in Chromium, at the link the program printed. The outputs the page shows are
compared with what the programs printed. DURABLE_UPDATE_SCREENSHOTS=1 also writes
docs/img/agent-frameworks-approval.png."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest
from responses_standin import ScriptedResponses

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "agent-frameworks.md"
DOCS_URL = "http://127.0.0.1:8787"
RUNNER, APPROVER = "docs-runner-token", "docs-approver-token"
FINAL = "Your order C-1042 has been refunded 25.00 EUR."


def fenced(text):
    """[(info string, body)] of the page's fenced blocks, in order."""
    found, info, body = [], None, []
    for line in text.splitlines(keepends=True):
        if info is None and line.startswith("```"):
            info, body = line[3:].strip(), []
        elif info is not None and line.rstrip("\n") == "```":
            found.append((info, "".join(body)))
            info = None
        elif info is not None:
            body.append(line)
    return found


def blocks(text):
    """{NAME: code} of the page's python blocks titled NAME."""
    return {m.group(1): body for info, body in fenced(text) if (m := re.fullmatch(r'python title="([\w.]+)"', info))}


def shown_outputs(text, script):
    """What the page shows ``python SCRIPT`` printing, run after run (blocks with no info string)."""
    outs = []
    for info, body in fenced(text):
        for run in re.split(r"^\$ ", body, flags=re.MULTILINE)[1:] if info == "" else ():
            command, _, output = run.partition("\n")
            if command.split("#")[0].split() == ["python", script]:
                outs.append(output)
    return outs


class Docs:
    """The page's programs in ``where``, with the environment they read, forked by the worker's
    fork server (conftest.py) or started as ``python NAME``."""

    def __init__(self, forks, where, env, remote):
        self.forks, self.where, self.env, self.remote, self.log = forks, where, env, remote, []
        where.mkdir()
        for name, code in blocks(PAGE.read_text()).items():
            (where / name).write_text(code)

    def run(self, script, interpreter=False):
        """What ``python SCRIPT`` printed; ``interpreter``: in a new interpreter, not a fork."""
        if interpreter:
            p = subprocess.run([sys.executable, script], cwd=self.where, env=self.env, capture_output=True, text=True,
                               timeout=300, check=False)
            assert p.returncode == 0, p.stderr[-3000:]
            out = p.stdout
        else:
            out = self.forks.start(self.where / script, cwd=self.where, env=self.env).output()
        self.log.append(f"$ python {script}\n{out}")
        return out

    def crash_after_write(self, script):
        """Run until the refunds API stored a refund, then kill -9 the program before it hears back."""
        self.remote.hold()
        child = self.forks.start(self.where / script, cwd=self.where, env=self.env)
        try:
            assert self.remote.written.wait(240), "the program never wrote"
        finally:
            child.kill()
            code = child.wait(30)
            self.remote.release.set()
        assert code == -9
        self.log.append(f"$ python {script}    # killed -9 after the refunds API stored the refund\n")


@pytest.fixture
def docs(tmp_path, remote, ledger_server, forks):
    server = ledger_server(f"sqlite:///{tmp_path / 'ledger.db'}", f"acme:runner:{RUNNER},acme:approver:{APPROVER}",
                           workers=1, threads=4)
    model = ScriptedResponses([("issue_refund", {"order_id": "C-1042", "amount_cents": 2500})], final=FINAL)
    env = {**os.environ, "DURABLE_LEDGER_URL": server.url, "DURABLE_TOKEN": RUNNER, "REFUNDS_API": remote.url,
           "OPENAI_BASE_URL": model.url, "OPENAI_API_KEY": "sk-offline-stand-in",
           "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    d = Docs(forks, tmp_path / "examples", env, remote)
    d.url = server.url
    yield d
    model.stop()
    print("\n" + "".join(d.log))


def approve_in_console(url, link, shot_dir, shot=None):
    """Open the printed link in Chromium, sign in as an approver, Approve."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait
    from support.browser import chromium

    browser = chromium(shot_dir / "chromium-profile", "1100,1050")
    try:
        browser.get(link)
        browser.find_element(By.ID, "token").send_keys(APPROVER)
        browser.find_element(By.ID, "sign-in").click()
        WebDriverWait(browser, 30).until(EC.presence_of_element_located((By.ID, "approve")))
        assert unquote(browser.current_url) == unquote(link)   # signed in, back on the printed page
        if shot:
            path = shot_dir / shot
            browser.save_screenshot(str(path))
            if os.environ.get("DURABLE_UPDATE_SCREENSHOTS") == "1":
                shutil.copy(path, REPO / "docs" / "img" / shot)
        browser.find_element(By.ID, "approve").click()
        WebDriverWait(browser, 30).until(EC.url_matches(r".*/console/approvals$"))
        assert "approved until" in browser.find_element(By.CSS_SELECTOR, ".flash").text
    finally:
        browser.quit()


def link_in(output):
    return re.fullmatch(r"approve at (\S+)\n", output).group(1)


def test_docs_page_titles_the_examples(tmp_path):
    examples = blocks(PAGE.read_text())
    assert set(examples) == {"refunds.py", "refund_agent.py", "refund_agent_approval.py", "refund_graph.py"}
    for name, code in examples.items():
        (tmp_path / name).write_text(code)
    ruff = subprocess.run([Path(sys.executable).parent / "ruff", "check", "--quiet", "--no-cache", "--isolated",
                           "--select", "F,E9,B006,B008", *examples], cwd=tmp_path, capture_output=True, text=True,
                          check=False)
    assert ruff.returncode == 0, ruff.stdout + ruff.stderr


def test_docs_agents_sdk_example_twice(docs, remote):
    assert docs.run("refund_agent.py", interpreter=True) == FINAL + "\n"
    assert docs.run("refund_agent.py") == FINAL + "\n"
    assert remote.writes() == 1


def test_docs_agents_sdk_example_killed_after_the_write(docs, remote):
    docs.crash_after_write("refund_agent.py")
    assert remote.writes() == 1
    assert docs.run("refund_agent.py") == FINAL + "\n"  # the lookup finds the refund: the tool answers with it
    assert docs.run("refund_agent.py") == FINAL + "\n"
    assert remote.writes() == 1


def test_docs_agents_sdk_approval_example(docs, remote, tmp_path):
    asked, done = shown_outputs(PAGE.read_text(), "refund_agent_approval.py")
    first = docs.run("refund_agent_approval.py")
    assert first == asked.replace(DOCS_URL, docs.url)
    assert docs.run("refund_agent_approval.py") == first and remote.writes() == 0   # still waiting
    approve_in_console(docs.url, link_in(first), tmp_path)
    docs.crash_after_write("refund_agent_approval.py")                              # resumes the saved RunState
    assert docs.run("refund_agent_approval.py") == done                              # the same RunState again
    assert remote.writes() == 1
    assert docs.run("refund_agent_approval.py") == done                              # a new run: the receipt
    assert remote.writes() == 1


def test_docs_langgraph_example(docs, remote, tmp_path):
    asked, done = shown_outputs(PAGE.read_text(), "refund_graph.py")
    first = docs.run("refund_graph.py")
    assert first == asked.replace(DOCS_URL, docs.url) and remote.writes() == 0
    approve_in_console(docs.url, link_in(first.splitlines(keepends=True)[0]), tmp_path,
                       shot="agent-frameworks-approval.png")
    docs.crash_after_write("refund_graph.py")                                       # resumes the checkpoint
    assert docs.run("refund_graph.py") == done                                      # the checkpoint again
    assert remote.writes() == 1
    assert docs.run("refund_graph.py") == done                                      # the thread again
    assert remote.writes() == 1
