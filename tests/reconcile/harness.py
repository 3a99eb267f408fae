"""The real stack for the reconciliation suite: a ledger process, a publishing-proxy process and
two WordPress sites (with and without the durable-ops plugin), plus a lossy TCP hop in front of
the plugin site. Callers are subprocesses (caller.py) that tests SIGKILL between steps.

    caller.py ──▶ ledger (durable-ledger serve) ──reconciler──▶ proxy (durable-ledger proxy serve)
        └──────────────────────────────────────────────────────▶ proxy ──▶ WordPress "test"
                                                                      ├──▶ LossyProxy ──▶ "test"
                                                                      └──▶ WordPress "plain"

Also used standalone by batch_interrupted.py, so nothing here depends on pytest.
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import requests

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
REPO = TESTS.parent

from durable_ledger.gate.dispatch_auth import remote_job_id  # noqa: E402
from support.netfaults import LossyProxy  # noqa: E402


# One launcher for the ledger and the proxy (stack/services.py); ProxyServer stays on a fixed
# port here, so it can be stopped and started again.
from services import LedgerServer, ProxyServer, free_port, ledger_bin  # noqa: E402,F401

BIN = ledger_bin()


TENANT = "acme"  # the tenant of every token below


class Stack:
    def __init__(self, workdir: Path, wp, wp_plain):
        self.workdir = Path(workdir)
        self.wp, self.wp_plain = wp, wp_plain
        self.runner = "runner-" + secrets.token_hex(8)
        self.editor = "editor-" + secrets.token_hex(8)
        self.reconciler = "reconciler-" + secrets.token_hex(8)
        self.approver = "approver-" + secrets.token_hex(8)
        self.tokens = (f"{TENANT}:runner:{self.runner}:test+plain+lossy,{TENANT}:editor:{self.editor},"
                       f"{TENANT}:editor:{self.reconciler},{TENANT}:approver:{self.approver}")
        self.database_url = f"sqlite:///{self.workdir / 'ledger.db'}"
        self.lossy = None
        self.ledger = self.proxy = None

    # ------------------------------------------------------------------ lifecycle

    def start(self):
        wp_port = int(self.wp.url.rsplit(":", 1)[1])
        self.lossy = LossyProxy("127.0.0.1", wp_port)
        sites = {
            "test": {"url": self.wp.url, "user": self.wp.user, "app_password": self.wp.app_password},
            "lossy": {"url": self.lossy.url, "user": self.wp.user, "app_password": self.wp.app_password},
            "plain": {"url": self.wp_plain.url, "user": self.wp_plain.user, "app_password": self.wp_plain.app_password},
        }
        proxy_port = free_port()
        self.proxy_url = f"http://127.0.0.1:{proxy_port}"
        self.ledger = LedgerServer(self.database_url, self.tokens, workers=1, threads=8,
                                   log_path=self.workdir / "ledger.log")
        self.ledger.env.update(DURABLE_PROXY_URL=self.proxy_url, DURABLE_PROXY_TOKEN=self.reconciler,
                               DURABLE_LOG_LEVEL="INFO")
        self.ledger.start()  # first: it creates the schema the proxy authenticates against
        self.proxy = ProxyServer(self.database_url, self.tokens, sites, proxy_port, self.workdir / "proxy.log")
        self.proxy.start()
        self.ledger_url = self.ledger.url
        return self

    def stop(self):
        for svc in (self.proxy, self.ledger):
            if svc is not None:
                svc.stop()
        if self.lossy is not None:
            self.lossy.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ------------------------------------------------------------------ ledger

    def h(self, token=None):
        return {"Authorization": f"Bearer {token or self.runner}"}

    def caller_config(self, job_id, site, title, pause=None):
        return {"ledger": self.ledger_url, "proxy": self.proxy_url, "token": self.runner, "job_id": job_id,
                "site": site, "title": title, "pause": pause}

    def operation(self, key):
        r = requests.get(f"{self.ledger_url}/v1/operations/{quote(key, safe='')}", headers=self.h(), timeout=30)
        r.raise_for_status()
        return r.json()

    def review_queue(self):
        r = requests.get(f"{self.ledger_url}/v1/reviews", headers=self.h(self.editor), timeout=30)
        r.raise_for_status()
        return r.json()["reviews"]

    def review_item(self, key):
        r = requests.get(f"{self.ledger_url}/v1/reviews/{quote(key, safe='')}", headers=self.h(self.editor),
                         timeout=30)
        r.raise_for_status()
        return r.json()

    def sweep(self, *args):
        """`durable-ledger sweep --sent-older-than 0s --verbose` as its own process; (tally, seconds)."""
        env = {**os.environ, "DURABLE_DATABASE_URL": self.database_url, "DURABLE_PROXY_URL": self.proxy_url,
               "DURABLE_PROXY_TOKEN": self.reconciler, "DURABLE_LOG_LEVEL": "WARNING"}
        t0 = time.monotonic()
        out = subprocess.run([str(BIN), "sweep", "--sent-older-than", "0s", "--verbose", *args], env=env,
                             capture_output=True, text=True, timeout=300)
        seconds = time.monotonic() - t0
        if out.returncode != 0:
            raise RuntimeError(f"sweep failed: {out.stderr[-2000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1]), seconds

    # ------------------------------------------------------------------ WordPress, counted at the source

    def site(self, name):
        return self.wp_plain if name == "plain" else self.wp

    def plugin_job_posts(self, job_id, tenant=TENANT):
        """Posts the durable-ops plugin binds to the job (drafts included); in WordPress the job id
        is tenant-qualified."""
        r = requests.get(self.wp.rest(f"/durable/v1/jobs/{quote(remote_job_id(tenant, job_id), safe='')}"),
                         auth=self.wp.auth, timeout=30)
        r.raise_for_status()
        return [o["id"] for o in r.json()["objects"] if o["object_type"] == "post"]

    def drafts_titled(self, site_name, title):
        """`wp/v2/posts?status=draft`, exact title: what core WordPress itself says exists."""
        site = self.site(site_name)
        r = requests.get(site.rest("/wp/v2/posts"), auth=site.auth, timeout=30,
                         params={"status": "draft", "context": "edit", "search": title, "per_page": 100})
        r.raise_for_status()
        return [p["id"] for p in r.json() if p["title"]["raw"] == title]

    def create_post_directly(self, site_name, title):
        """A post made by hand in WordPress (no key, no job): what an editor may have done."""
        site = self.site(site_name)
        r = requests.post(site.rest("/wp/v2/posts"), auth=site.auth, timeout=30,
                          json={"title": title, "content": "<p>written by hand</p>", "status": "draft"})
        assert r.status_code == 201, r.text
        return r.json()["id"]


class Caller:
    """caller.py as a subprocess; `wait_for("PAUSE")` then `kill()` is a crash between two steps."""

    def __init__(self, cfg):
        self.proc = subprocess.Popen([sys.executable, str(HERE / "caller.py"), json.dumps(cfg)], text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)
        self.lines = []

    def wait_for(self, tag, timeout=60):
        """Read stdout until a line starting with ``tag``; returns its JSON (None without a body)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                err = self.proc.stderr.read()
                raise RuntimeError(f"caller exited ({self.proc.wait()}) before {tag}; saw {self.lines}; {err[-2000:]}")
            self.lines.append(line.rstrip())
            if line.startswith(tag):
                rest = line[len(tag):].strip()
                return json.loads(rest) if rest else None
        raise TimeoutError(f"no {tag} from the caller within {timeout} s; saw {self.lines}")

    def kill(self):
        """SIGKILL: no cleanup, no last words, exactly like a machine that went away."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            f.close()

    def finish(self, timeout=60):
        out, err = self.proc.communicate(timeout=timeout)
        self.lines += out.splitlines()
        if self.proc.returncode != 0:
            raise RuntimeError(f"caller failed ({self.proc.returncode}): {err[-2000:]}")
        return self.lines


def crash_at(stack, job_id, site, title, point):
    """Run a caller until ``point`` (before_send / after_write), kill it, return its operation key."""
    caller = Caller(stack.caller_config(job_id, site, title, pause=point))
    begun = caller.wait_for("BEGUN")
    assert begun["decision"] == "dispatch", begun
    written = caller.wait_for("WRITTEN") if point == "after_write" else None
    caller.wait_for("PAUSE")
    caller.kill()
    return begun["operation"]["operation_key"], written


def resume(stack, job_id, site, title):
    """A fresh caller after the crash (new owner, new fencing token); runs to the end in-process."""
    import caller

    return caller.run(stack.caller_config(job_id, site, title), say=lambda *a: None)
