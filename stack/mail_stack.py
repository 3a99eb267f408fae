"""A real mail server for the orders sample: SMTP in, Maildir, IMAP and doveadm out.

    n8n Send Email ──SMTP──▶ aiosmtpd (this file, `smtp` subcommand) ──▶ Maildir ◀── Dovecot 2.3
                                                                                     ├─ IMAP (tests count here)
    n8n HTTP Request (Look Up) ──────── doveadm HTTP API (`search`) ─────────────────┘

SMTP: aiosmtpd (PyPI) accepts a message and writes it into the Maildir (`mailbox.Maildir.add`:
tmp/ then an atomic rename into new/) *before* it answers 250, so a message the client saw
accepted is in the mailbox, and one whose DATA was cut off is not. Every recipient lands in one
catch-all mailbox (user `customers`).
IMAP and the lookup: Dovecot 2.3 from Debian (`dovecot-imapd`), a private instance (own config,
base_dir, ports) serving that Maildir. n8n has no IMAP search node (Email Trigger (IMAP) is a
trigger), so the workflow's Look Up asks Dovecot's doveadm HTTP API (`search` over the same
mailbox, the same index IMAP uses); the tests count through IMAP (imaplib).

Root is needed to start Dovecot (it drops to its own users). The Maildir's directories belong to
the Debian `mail` user (uid 8), Dovecot's mail user here; the SMTP process (root, because the
venv's interpreter may live under /root) writes world-readable files into new/.

    MailServer().start() -> state (ports, user, password, doveadm URL + API key); .stop() removes it all
    python stack/mail_stack.py smtp --port P --maildir DIR   # the SMTP process MailServer starts
"""
from __future__ import annotations

import argparse
import base64
import imaplib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests
from localhost import free_port  # noqa: E402

HERE = Path(__file__).resolve().parent
MAIL_USER = "mail"  # Debian's base-passwd user (uid 8) owns the Maildir
IMAP_USER = "customers"
DOMAIN = "shop.test"


def ensure_dovecot():
    if shutil.which("dovecot") or Path("/usr/sbin/dovecot").exists():
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if subprocess.run(["apt-cache", "show", "dovecot-imapd"], capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "dovecot-imapd"], check=True,
                   env=env, stdout=subprocess.DEVNULL)


DOVECOT_CONF = """\
# Private Dovecot instance for the orders sample (stack/mail_stack.py); nothing system-wide.
instance_name = durable-orders-{imap_port}
base_dir = {work}/run
state_dir = {work}/state
log_path = {work}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
first_valid_uid = {uid}
last_valid_uid = {uid}
mail_location = maildir:{maildir}
default_login_user = dovenull
default_internal_user = dovecot
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {work}/users
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={home}
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap_port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service doveadm {{
  inet_listener http {{
    address = 127.0.0.1
    port = {http_port}
  }}
}}
doveadm_api_key = {api_key}
"""


class MailServer:
    def __init__(self, workdir: Path | None = None, domain: str = DOMAIN):
        """``domain``: the only recipient domain SMTP accepts (the orders sample's customers by default)."""
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="durable-mail-"))
        self.domain = domain
        self.procs: list[subprocess.Popen] = []
        self.state: dict = {}

    def start(self) -> dict:
        ensure_dovecot()
        w = self.workdir
        w.mkdir(parents=True, exist_ok=True)
        os.chmod(w, 0o755)  # the mail user must reach the Maildir below it
        pw = pwd.getpwnam(MAIL_USER)
        home, maildir = w / "home", w / "home" / "Maildir"
        for d in (home, maildir, maildir / "tmp", maildir / "new", maildir / "cur"):
            d.mkdir(parents=True, exist_ok=True)
            os.chown(d, pw.pw_uid, pw.pw_gid)
        for d in ("run", "state"):
            (w / d).mkdir(exist_ok=True)
        password, api_key = secrets.token_hex(8), secrets.token_hex(16)
        (w / "users").write_text(f"{IMAP_USER}:{{PLAIN}}{password}::::::\n")
        smtp_port, imap_port, http_port = free_port(), free_port(), free_port()
        conf = w / "dovecot.conf"
        conf.write_text(DOVECOT_CONF.format(work=w, maildir=maildir, home=home, uid=pw.pw_uid, gid=pw.pw_gid,
                                            imap_port=imap_port, http_port=http_port, api_key=api_key))
        with open(w / "services.log", "ab") as log:  # the children keep their own descriptors
            self.procs.append(subprocess.Popen([shutil.which("dovecot") or "/usr/sbin/dovecot", "-F", "-c", str(conf)], stdout=log, stderr=log,
                                               start_new_session=True))
            self.procs.append(subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "smtp", "--port", str(smtp_port), "--maildir",
                 str(maildir), "--domain", self.domain], stdout=log, stderr=log, start_new_session=True))
        self.state = {"workdir": str(w), "maildir": str(maildir), "smtp_port": smtp_port, "imap_port": imap_port,
                      "doveadm_url": f"http://127.0.0.1:{http_port}/doveadm/v1", "api_key": api_key,
                      "user": IMAP_USER, "password": password, "domain": self.domain,
                      "pids": [p.pid for p in self.procs]}
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", smtp_port), timeout=1) as s:
                    s.recv(100)
                self.imap_count()
                self.doveadm_search("ALL")
                break
            except (OSError, imaplib.IMAP4.error, requests.RequestException, RuntimeError):
                if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                    raise RuntimeError("mail server did not come up:\n" + self.logs())
                time.sleep(0.2)
        return self.state

    def logs(self) -> str:
        out = ""
        for name in ("services.log", "dovecot.log"):
            p = self.workdir / name
            if p.exists():
                out += f"--- {name}\n" + p.read_text(errors="replace")[-2000:]
        return out

    def stop(self):
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
        self.procs.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)

    # ---------------------------------------------------------------- what the mailbox holds

    def imap_count(self, subject_part: str | None = None) -> int:
        """Messages in the catch-all INBOX, counted by the IMAP server (SEARCH)."""
        with imaplib.IMAP4("127.0.0.1", self.state["imap_port"]) as imap:
            imap.login(self.state["user"], self.state["password"])
            imap.select("INBOX", readonly=True)
            if subject_part is None:
                typ, data = imap.search(None, "ALL")
            else:
                typ, data = imap.search("UTF-8", "SUBJECT", f'"{subject_part}"')
            if typ != "OK":
                raise RuntimeError(f"IMAP SEARCH: {typ} {data}")
            return len(data[0].split())

    def imap_messages(self) -> list:
        """Every message of the catch-all INBOX as received (email.message.EmailMessage), oldest first."""
        from email import message_from_bytes, policy

        with imaplib.IMAP4("127.0.0.1", self.state["imap_port"]) as imap:
            imap.login(self.state["user"], self.state["password"])
            imap.select("INBOX", readonly=True)
            _t, data = imap.search(None, "ALL")
            out = []
            for num in data[0].split():
                _t, msg = imap.fetch(num, "(BODY.PEEK[])")
                out.append(message_from_bytes(msg[0][1], policy=policy.default))
            return out

    def doveadm_search(self, *query: str) -> list:
        """What the workflow's Look Up asks: doveadm `search` over the HTTP API."""
        body = [["search", {"user": self.state["user"], "query": ["mailbox", "INBOX", *query]}, "t"]]
        auth = base64.b64encode(self.state["api_key"].encode()).decode()
        r = requests.post(self.state["doveadm_url"], json=body, timeout=10,
                          headers={"Authorization": f"X-Dovecot-API {auth}"})
        r.raise_for_status()
        (kind, result, _tag), = r.json()
        if kind != "doveadmResponse":
            raise RuntimeError(f"doveadm: {kind} {result}")
        return result


# -------------------------------------------------------------------- the SMTP server process

def run_smtp(port: int, maildir: str, domain: str = DOMAIN):
    import mailbox
    from email import message_from_bytes, policy

    from aiosmtpd.controller import Controller

    box = mailbox.Maildir(maildir, create=False)

    class Deliver:
        async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
            if not address.lower().endswith("@" + domain):
                return "550 5.1.1 not a local recipient"
            envelope.rcpt_tos.append(address)
            return "250 OK"

        async def handle_DATA(self, server, session, envelope):
            msg = message_from_bytes(envelope.original_content or envelope.content, policy=policy.SMTP)
            for rcpt in envelope.rcpt_tos:
                m = mailbox.MaildirMessage(msg)
                m["Delivered-To"] = rcpt
                box.add(m)  # tmp/ -> new/ (rename), before the 250 below
            return "250 2.0.0 delivered to Maildir"

    ctl = Controller(Deliver(), hostname="127.0.0.1", port=port)
    ctl.start()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_a: stop.append(1))
    while not stop:
        time.sleep(0.2)
    ctl.stop()


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("smtp")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--maildir", required=True)
    s.add_argument("--domain", default=DOMAIN)
    args = ap.parse_args()
    if args.cmd == "smtp":
        run_smtp(args.port, args.maildir, args.domain)


if __name__ == "__main__":
    main()
