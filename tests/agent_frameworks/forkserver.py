"""Agent processes without the frameworks' import time: a process that imports the OpenAI Agents
SDK, LangGraph and the client once, then forks a child for every program a test runs.

    python forkserver.py      (requests on stdin, one JSON line each; one JSON line answers)
    {"run": SCRIPT, "args": [...], "cwd": DIR, "env": {...}, "stdout": PATH, "stderr": PATH} -> {"pid": N}
    {"wait": N}                                                                        -> {"returncode": R}

`import agents` alone takes 3 s on a quiet machine and over 15 s on a loaded one (openai's and
mcp's types), and every test starts three to five agent processes. A child is still a process of
its own: it runs SCRIPT as ``__main__`` (``python SCRIPT args`` in DIR, with that environment),
starts from the state the server had after its imports (nothing a test did), and a test kills it
with SIGKILL like any other. The server holds no thread, connection or event loop when it forks.
"""

import importlib
import json
import os
import runpy
import sys
import threading
import traceback

PRELOAD = ("requests", "agents", "agents.items", "openai.types.responses", "langgraph.graph", "langgraph.types",
           "langgraph.checkpoint.sqlite", "langgraph.checkpoint.postgres", "durable_ledger.client",
           "durable_ledger.integrations.agents_sdk", "durable_ledger.integrations.langgraph")


def _child(req):
    try:
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        for fd, path in ((0, os.devnull), (1, req["stdout"]), (2, req["stderr"])):
            target = os.open(path, os.O_RDONLY if fd == 0 else os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(target, fd)
            os.close(target)
        script = os.path.abspath(req["run"])
        sys.argv, sys.path[0] = [script, *req["args"]], os.path.dirname(script)
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def main():
    for name in PRELOAD:
        importlib.import_module(name)
    assert threading.active_count() == 1, "a preloaded module started a thread: forking it is not safe"
    out = sys.stdout
    for line in sys.stdin:
        req = json.loads(line)
        if "wait" in req:
            _, status = os.waitpid(req["wait"], 0)
            answer = {"returncode": os.waitstatus_to_exitcode(status)}
        else:
            out.flush()
            pid = os.fork()
            if pid == 0:
                _child(req)
            answer = {"pid": pid}
        out.write(json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
