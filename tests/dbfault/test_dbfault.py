"""The ledger's own database fails, and nothing is lost (issue 35 part 4).

Real n8n 2.40.7 (`n8n start`, production webhooks) runs Webhook -> Start Job -> Gated HTTP Request
against the real ledger server, and a direct client (direct.py) calls begin / confirm / batch /
lookup-result itself; both write to a remote that counts every order (remote.py). The ledger's
PostgreSQL is a private cluster of this suite (pg_cluster.py) reached through a relay the test
controls (pg_relay.py); a second ledger runs on SQLite. The faults, each with its own jobs:

    1 kill -9   PostgreSQL killed (every process, no shutdown) while a begin, a confirm and a batch
                of the direct client and a begin and a confirm of n8n are in flight, some with
                their commit landed and the answer not yet back; then started again
    2 cut       the link ledger <-> PostgreSQL cut after the commit of a begin, a confirm, a batch
                and a Start Job transaction (`COMMIT`) went out, before the answer came back
    3 disk      the disk under the cluster (a tmpfs) full while steps run; then space freed
    4 refused   PostgreSQL stopped for 30 s while steps run and /health is polled
    5 sqlite    another process holds BEGIN EXCLUSIVE on the SQLite ledger past its busy timeout
                while begins, a confirm and a batch wait; n8n's confirm among them

What must hold, counted at the remote and in the database (not in what the ledger says):
no answer claims a state the database does not have; every ledger error reaches its caller as 503
`database_unavailable` in the error shape, quickly (no hang); the node sends nothing after a
failed begin; once the database is back (no ledger restart), the re-run (n8n) / the next calls
(direct) end every step exactly once at the remote with its receipt stored; /health is 503 while
PostgreSQL is down and ok after. The table of what was measured is printed at the end and kept
in $DURABLE_CACHE/dbfault-suite.md.
"""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
from dbfault_stack import TIMEOUT_MS, DbFaultStack
from direct import Book, Direct, in_thread
from remote import CountingRemote

ROWS: list[dict] = []
COLUMNS = (("fault", "fault"), ("dup", "duplicates at the remote"), ("lost", "lost receipts"),
           ("undone", "steps never done"), ("unshaped", "answers without the error shape"),
           ("phantom", "answers claiming a state the database lacks"),
           ("sent_after_error", "sends after a failed begin"), ("errors", "503 database_unavailable seen"),
           ("slowest", "slowest answer (s)"), ("recover", "seconds to recover"))
TRAP_WAIT_S = 90


class Env:
    def __init__(self, st: DbFaultStack, remote: CountingRemote):
        self.st, self.remote, self.book = st, remote, Book()
        self.token = st.tokens["runner"]
        self.executions: dict[str, list[str]] = {}  # order -> its n8n executions, in order

    def url(self, sqlite: bool) -> str:
        return self.st.sqlite.url if sqlite else self.st.ledger_url

    def direct(self, fault: str, sqlite: bool = False) -> Direct:
        return Direct(self.url(sqlite), self.token, self.remote, self.book, fault)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    remote = CountingRemote()
    st = DbFaultStack(tmp_path_factory.mktemp("dbfault"))
    t0 = time.monotonic()
    try:
        st.start_all(remote.url)
        st.say(f"stack up in {time.monotonic() - t0:.0f} s")
        yield Env(st, remote)
    finally:
        report()
        remote.close()
        st.stop()


# ---------------------------------------------------------------------- n8n

def fire(env: Env, wf: str, order: str) -> str:
    """POST the workflow's webhook for the order; the id of the execution it started."""
    before = {e["id"] for e in env.st.executions(wf)}
    assert env.st.fire(wf, order) == 200
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        new = [e["id"] for e in env.st.executions(wf) if e["id"] not in before]
        if new:
            env.executions.setdefault(order, []).append(new[0])
            return new[0]
        time.sleep(0.1)
    raise TimeoutError(f"no execution of {wf} for {order}")


def fire_all(env: Env, wf: str, orders) -> dict[str, str]:
    """The webhooks one after the other (an execution id each), the runs at the same time."""
    return {o: fire(env, wf, o) for o in orders}


def ended(env: Env, wf: str, ids: dict[str, str], timeout: float = 150) -> dict[str, dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = {e["id"]: e for e in env.st.executions(wf)}
        if all(rows.get(i, {}).get("status") in ("success", "error", "crashed", "canceled") for i in ids.values()):
            return {o: {**rows[i], "error": env.st.error_of(i)} for o, i in ids.items()}
        time.sleep(0.2)
    raise TimeoutError(f"executions did not end: {ids}\n{env.st.server_log()[-3000:]}")


def rerun(env: Env, wf: str, orders, state_of) -> None:
    """The re-run after the fault: the workflow again for every order whose step is not CONFIRMED,
    until each is (at most four runs each). A step left SENT by a lost answer is "in flight" for
    the request's timeout (TIMEOUT_MS): the node answers Needs Attention `in_flight_lookup` until
    then and sends nothing, so a later run waits that long."""
    for round_ in range(4):
        todo = [o for o in orders if state_of(o) != "CONFIRMED"]
        if not todo:
            return
        if round_:
            time.sleep(TIMEOUT_MS / 1000 / 2)
        ended(env, wf, fire_all(env, wf, todo))


# ---------------------------------------------------------------------- the database, read directly

def key_of(job: str) -> str:
    return f"demo:{job}:v1:create_order"


def pg_rows(env: Env) -> dict[str, tuple]:
    return {k: (s, a, r) for k, s, a, r in env.st.cluster.query(
        "SELECT operation_key, state, attempt, remote_id FROM operation")}


def sqlite_rows(env: Env) -> dict[str, tuple]:
    con = sqlite3.connect(f"file:{env.st.sqlite_db}?mode=ro", uri=True)
    try:
        return {k: (s, a, r) for k, s, a, r in con.execute(
            "SELECT operation_key, state, attempt, remote_id FROM operation")}
    finally:
        con.close()


# ---------------------------------------------------------------------- recovery and counting

def recovery_seconds(env: Env, sqlite: bool, t_back: float, probe: str) -> float:
    """Seconds from the database being usable again until the ledger (not restarted) answers
    /health ok and takes a write."""
    url = env.url(sqlite)
    deadline = t_back + 90
    while time.monotonic() < deadline:
        try:
            h = requests.get(url + "/health", timeout=5)
            if h.status_code == 200 and h.json().get("database") == "ok":
                r = requests.put(f"{url}/v1/jobs/{probe}", json={}, headers={"Authorization": f"Bearer {env.token}"},
                                 timeout=15)
                if r.status_code in (200, 201):
                    return round(time.monotonic() - t_back, 2)
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise AssertionError(f"the ledger did not recover within 90 s\n{env.st.ledger_log()[-3000:]}")


def count(env: Env, fault: str, title: str, *, sqlite: bool, jobs: list[str], n8n_first: dict[str, dict],
          begin_orders: list[str], writes_after_first: dict[str, int], recover: float) -> dict:
    rows = sqlite_rows(env) if sqlite else pg_rows(env)
    dup = lost = undone = 0
    for job in jobs:
        writes = env.remote.writes_of(job)
        dup += max(0, len(writes) - 1)
        undone += not writes
        state, _attempt, remote_id = rows.get(key_of(job), (None, 0, None))
        lost += bool(writes) and not (state == "CONFIRMED" and remote_id in {w["id"] for w in writes})
    answers = env.book.of(fault)
    unshaped = [a for a in answers if not a["shaped"] or (a["status"] and a["status"] >= 500
                                                           and a["code"] != "database_unavailable")]
    errors = sum(a["code"] == "database_unavailable" for a in answers)
    for order, run in n8n_first.items():  # a failed first run must have failed on the ledger's 503
        if run["status"] != "success":
            if "database_unavailable" in (run["error"] or ""):
                errors += 1
            else:
                unshaped.append({"n8n": order, "error": run["error"]})
    keys = {key_of(j) for j in jobs}
    phantom = []
    for key, state, attempt in [c for c in env.book.claims if c[0] in keys]:
        have = rows.get(key)
        if have is None or (state == "CONFIRMED" and have[0] != "CONFIRMED") or have[1] < attempt:
            phantom.append((key, state, attempt, have))
    row = {"fault": title, "dup": dup, "lost": lost, "undone": undone, "unshaped": len(unshaped),
           "phantom": len(phantom),
           "sent_after_error": sum(writes_after_first.get(o, 0) for o in begin_orders
                                   if n8n_first.get(o, {}).get("status") != "success"),
           "errors": errors, "slowest": max((a["seconds"] for a in answers), default=0.0), "recover": recover}
    ROWS.append(row)
    print(f"\nDURABLE_DBFAULT {row}", flush=True)
    assert row["dup"] == 0 and row["lost"] == 0 and row["undone"] == 0, (row, rows)
    assert not unshaped, unshaped[:5]
    assert not phantom, phantom[:5]
    assert row["sent_after_error"] == 0, row
    assert row["errors"] > 0, f"{fault}: the fault never reached a caller: {row}"
    return row


def report():
    if not ROWS:
        return
    head = "| " + " | ".join(h for _, h in COLUMNS) + " |"
    lines = [head, "|---" * len(COLUMNS) + "|"]
    lines += ["| " + " | ".join(str(r[k]) for k, _ in COLUMNS) + " |" for r in ROWS]
    table = "\n".join(lines) + "\n"
    print("\n\nThe ledger's database fails (tests/dbfault):\n" + table, flush=True)
    cache = os.environ.get("DURABLE_CACHE") or str(Path.home() / ".cache" / "durable-steps")
    path = Path(os.environ.get("DURABLE_DBFAULT_RESULTS") or Path(cache) / "dbfault-suite.md")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(table)


def join(threads, timeout: float = 180):
    for th in threads:
        th.join(timeout)
        assert not th.is_alive(), "a direct client is still waiting"
        if th.error is not None:
            raise th.error


def wait_hits(env: Env, traps: dict):
    deadline = time.monotonic() + TRAP_WAIT_S
    for name, trap in traps.items():
        if not trap.hit.wait(max(0.1, deadline - time.monotonic())):
            raise AssertionError(f"trap {name} was not hit\n{env.st.server_log()[-2000:]}")


def begin_trap(job: str) -> str:
    return rf"EXECUTE durable_begin\w*\(.*'{job}'"


def confirm_trap(job: str) -> str:
    return rf"EXECUTE durable_confirm\w*\(.*'{key_of(job)}'"


# ---------------------------------------------------------------------- the faults

def _in_flight(env: Env, fault: str, f: str, modes: dict, pre_fault=None, post_fault=None) -> dict:
    """Arms the relay on the direct client's begin, confirm and batch and on n8n's begin and
    confirm (modes: position -> relay mode), runs them all, and once every trap is hit calls
    `pre_fault()` (the fault itself) and releases the traps (the link to the ledger is cut);
    `post_fault()` -> the moment the database is usable again."""
    relay, remote = env.st.relay, env.remote
    d = env.direct(fault)
    prepared = d.prepared(f"{f}-d-bc", f"{f}-d-bc")
    tokens = {j: d.start(j) for j in (f"{f}-d-b1", f"{f}-d-b2")}
    traps = {
        "direct begin": relay.arm(begin_trap(f"{f}-d-begin"), modes["begin"]),
        "direct confirm": relay.arm(confirm_trap(f"{f}-d-confirm"), modes["confirm"]),
        "direct batch": relay.arm(begin_trap(f"{f}-d-b1"), modes["batch"]),
        "n8n begin": relay.arm(begin_trap(f"{f}-n-begin"), modes["begin"]),
        "n8n confirm": relay.arm(confirm_trap(f"{f}-n-confirm"), modes["confirm"]),
    }
    if "start" in modes:  # a multi-statement transaction: Start Job's, cut at its COMMIT
        traps["direct start job"] = relay.arm(r"^\s*COMMIT", modes["start"], within=rf"'{f}-d-start'")
    threads = [in_thread(d.step, f"{f}-d-begin", f"{f}-d-begin"), in_thread(d.step, f"{f}-d-confirm", f"{f}-d-confirm"),
               in_thread(d.batch, (*prepared, f"{f}-d-bc"), [(j, j, t) for j, t in tokens.items()])]
    if "start" in modes:
        threads.append(in_thread(d.step, f"{f}-d-start", f"{f}-d-start"))
    try:
        first = fire_all(env, "dbpg", [f"{f}-n-begin", f"{f}-n-confirm"])
        wait_hits(env, traps)
        if pre_fault:
            pre_fault()
        t_back = post_fault() if post_fault else time.monotonic()
    finally:  # never leave a request held (a failed round would starve the next ones)
        relay.disarm()
        for trap in traps.values():
            trap.release()
    recover = recovery_seconds(env, False, t_back, f"{f}-probe")
    runs = ended(env, "dbpg", first)
    writes_after_first = {o: len(remote.writes_of(o)) for o in first}
    assert writes_after_first[f"{f}-n-confirm"] == 1, writes_after_first  # it was written before its confirm
    join(threads)
    rerun(env, "dbpg", list(first), lambda o: pg_rows(env).get(key_of(o), ("",))[0])
    jobs = [f"{f}-d-begin", f"{f}-d-confirm", f"{f}-d-bc", f"{f}-d-b1", f"{f}-d-b2", *first]
    if "start" in modes:
        jobs.append(f"{f}-d-start")
    landed = {n: t.answered for n, t in traps.items() if t.mode == "answer_lost"}
    assert all(landed.values()), landed  # each of those commits was answered by the server: it landed
    return {"jobs": jobs, "n8n_first": runs, "begin_orders": [f"{f}-n-begin"], "writes_after_first": writes_after_first,
            "recover": recover}


def test_dbfault_postgres_killed_mid_begin_confirm_batch(env):
    """kill -9 of PostgreSQL with five steps in flight: three whose commit landed and whose answer
    is held (direct begin, direct batch, n8n begin and confirm) and one whose statement never
    reached the server (direct confirm); then PostgreSQL starts again (crash recovery)."""
    cluster = env.st.cluster
    out = _in_flight(env, "kill9", "f1", {"begin": "answer_lost", "confirm": "held", "batch": "answer_lost"},
                     pre_fault=cluster.kill9, post_fault=lambda: (cluster.start(), time.monotonic())[1])
    count(env, "kill9", "1 kill -9 of PostgreSQL mid begin / confirm / batch, restart", sqlite=False, **out)
    assert "database unavailable on POST" in env.st.ledger_log()


def test_dbfault_link_cut_after_commit(env):
    """The link cut after the COMMIT went out (the server committed and answered; the answer never
    arrives): the single-statement commits of begin, confirm and batch, and Start Job's COMMIT."""
    out = _in_flight(env, "cut", "f2", {"begin": "answer_lost", "confirm": "answer_lost", "batch": "answer_lost",
                                        "start": "answer_lost"})
    count(env, "cut", "2 link ledger-PostgreSQL cut after COMMIT, before its answer", sqlite=False, **out)


def test_dbfault_disk_full(env):
    """The cluster's disk full under traffic: steps started while it is full get 503 until space
    is freed, then finish once each."""
    cluster, d = env.st.cluster, env.direct("disk")
    prepared = d.prepared("f3-d-bc", "f3-d-bc")
    confirm_later = d.prepared("f3-d-confirm", "f3-d-confirm")
    tokens = {j: d.start(j) for j in ("f3-d-begin", "f3-d-b1", "f3-d-b2")}
    cluster.fill_disk()
    t_full = time.monotonic()
    pressure = 0  # new jobs until the first refusal: the pages' last free space is used up
    while pressure < 400 and d.call(f"/v1/jobs/f3-p{pressure}/start", {"owner": "p"})[0] != 503:
        pressure += 1
    threads = [in_thread(d.step, "f3-d-begin", "f3-d-begin", tokens["f3-d-begin"]),
               in_thread(d.confirm, confirm_later[0], confirm_later[1], confirm_later[2]),
               in_thread(d.batch, (*prepared, "f3-d-bc"), [(j, j, tokens[j]) for j in ("f3-d-b1", "f3-d-b2")])]
    first = fire_all(env, "dbpg", ["f3-n-1", "f3-n-2"])
    runs = ended(env, "dbpg", first)
    writes_after_first = {o: len(env.remote.writes_of(o)) for o in first}
    time.sleep(max(0.0, 6 - (time.monotonic() - t_full)))  # the direct calls keep meeting the full disk
    cluster.free_disk()
    t_back = time.monotonic()
    recover = recovery_seconds(env, False, t_back, "f3-probe")
    join(threads)
    rerun(env, "dbpg", list(first), lambda o: pg_rows(env).get(key_of(o), ("",))[0])
    assert "DiskFull" in env.st.ledger_log() or "No space left" in env.st.ledger_log()
    jobs = ["f3-d-begin", "f3-d-confirm", "f3-d-bc", "f3-d-b1", "f3-d-b2", *first]
    # n8n's runs on a full disk fail at Start Job or at the begin: nothing may have been sent then
    failed = [o for o, r in runs.items() if r["status"] != "success"]
    count(env, "disk", "3 PostgreSQL's disk full under traffic, then space freed", sqlite=False, jobs=jobs,
          n8n_first=runs, begin_orders=failed, writes_after_first=writes_after_first, recover=recover)


def test_dbfault_postgres_refuses_30s(env):
    """PostgreSQL down for 30 s: every call answers 503 at once (no hang), /health answers 503
    `database: unreachable`, and everything goes on once it is back, without a ledger restart."""
    cluster, d = env.st.cluster, env.direct("refused")
    prepared = d.prepared("f4-d-bc", "f4-d-bc")
    confirm_later = d.prepared("f4-d-confirm", "f4-d-confirm")
    tokens = {j: d.start(j) for j in ("f4-d-begin", "f4-d-b1", "f4-d-b2")}
    cluster.stop()
    t_down = time.monotonic()
    health = []
    stop_polling = threading.Event()

    def poll():
        while not stop_polling.is_set():
            t = time.monotonic()
            try:
                r = requests.get(env.st.ledger_url + "/health", timeout=10)
                health.append((r.status_code, r.json(), time.monotonic() - t))
            except requests.RequestException as exc:
                health.append((None, str(exc), time.monotonic() - t))
            time.sleep(0.5)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    threads = [in_thread(d.step, "f4-d-begin", "f4-d-begin", tokens["f4-d-begin"]),
               in_thread(d.confirm, confirm_later[0], confirm_later[1], confirm_later[2]),
               in_thread(d.batch, (*prepared, "f4-d-bc"), [(j, j, tokens[j]) for j in ("f4-d-b1", "f4-d-b2")])]
    first = fire_all(env, "dbpg", ["f4-n-1", "f4-n-2"])
    runs = ended(env, "dbpg", first)
    writes_after_first = {o: len(env.remote.writes_of(o)) for o in first}
    assert all(r["status"] != "success" for r in runs.values()), runs
    time.sleep(max(0.0, 30 - (time.monotonic() - t_down)))
    stop_polling.set()
    poller.join(15)
    cluster.start()
    t_back = time.monotonic()
    recover = recovery_seconds(env, False, t_back, "f4-probe")
    join(threads)
    rerun(env, "dbpg", list(first), lambda o: pg_rows(env).get(key_of(o), ("",))[0])
    down = [h for h in health if h[0] != 200]
    assert down and all(h[0] == 503 and h[1].get("database") == "unreachable"
                        and h[1]["error"]["code"] == "database_unavailable" for h in down), health[:5]
    assert max(h[2] for h in health) < 5, health
    jobs = ["f4-d-begin", "f4-d-confirm", "f4-d-bc", "f4-d-b1", "f4-d-b2", *first]
    count(env, "refused", "4 PostgreSQL refusing connections for 30 s", sqlite=False, jobs=jobs, n8n_first=runs,
          begin_orders=list(first), writes_after_first=writes_after_first, recover=recover)


LOCKER = """
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
con.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
con.execute("COMMIT")
"""


def test_dbfault_sqlite_lock_past_busy_timeout(env):
    """Another process holds BEGIN EXCLUSIVE on the SQLite ledger's file for 16 s, past the 10 s
    busy timeout: the begins, the confirms (n8n's too: its write held at the remote until the
    lock is taken) and a batch waiting behind it answer 503; after it, everything finishes."""
    d = env.direct("sqlite", sqlite=True)
    prepared = d.prepared("f5-d-bc", "f5-d-bc")
    confirm_later = d.prepared("f5-d-confirm", "f5-d-confirm")
    tokens = {j: d.start(j) for j in ("f5-d-begin", "f5-d-b1", "f5-d-b2")}
    held = env.remote.hold("f5-n-confirm")
    first = {"f5-n-confirm": fire(env, "dbsq", "f5-n-confirm")}
    assert held.wait(60), "n8n's write never reached the remote"
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(env.st.sqlite_db), "16"], stdout=subprocess.PIPE,
                              text=True)
    assert locker.stdout.readline().strip() == "locked"
    env.remote.release("f5-n-confirm")  # n8n confirms now, behind the lock
    threads = [in_thread(d.step, "f5-d-begin", "f5-d-begin", tokens["f5-d-begin"]),
               in_thread(d.confirm, confirm_later[0], confirm_later[1], confirm_later[2]),
               in_thread(d.batch, (*prepared, "f5-d-bc"), [(j, j, tokens[j]) for j in ("f5-d-b1", "f5-d-b2")])]
    first["f5-n-begin"] = fire(env, "dbsq", "f5-n-begin")
    assert locker.wait(60) == 0
    locker.stdout.close()
    t_back = time.monotonic()
    recover = recovery_seconds(env, True, t_back, "f5-probe")
    runs = ended(env, "dbsq", first)
    writes_after_first = {o: len(env.remote.writes_of(o)) for o in first}
    join(threads)
    rerun(env, "dbsq", list(first), lambda o: sqlite_rows(env).get(key_of(o), ("",))[0])
    jobs = ["f5-d-begin", "f5-d-confirm", "f5-d-bc", "f5-d-b1", "f5-d-b2", *first]
    count(env, "sqlite", "5 SQLite locked by another process past the busy timeout", sqlite=True, jobs=jobs,
          n8n_first=runs, begin_orders=["f5-n-begin"], writes_after_first=writes_after_first, recover=recover)
