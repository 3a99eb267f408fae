"""Run test suites (make targets) side by side: `make test`'s second half.

    python3 stack/run_suites.py --jobs 3 --prepared "setup deps dist ..." test-ledger test-node ...

Most suites spend their time waiting: on n8n booting, on a process we SIGKILLed coming back, on
WordPress and PostgreSQL. Two cores are idle for much of a sequential run, so up to --jobs suites
run at once, the longest first (the order given; `make test` lists them by their usual time).

Every suite's prerequisites (the venv, Node, n8n, the dist artifacts, the WordPress cores) were
built once before, by `make prepare`; each suite's make is told they are up to date (`-o`),
so two suites never rebuild dist/ at the same moment.

Each suite gets its own slice of the port range free_port() picks from (DURABLE_PORT_RANGE,
stack/localhost.py): two suites that pick a port at the same moment cannot pick the same one.

A suite's output goes to its log (under --logs) and is printed in one piece when it ends, with
its time and the CPU seconds it used (its processes and every descendant they waited for; the
databases and WordPress's PHP run outside and are not counted). The failing suites' names come
again at the end. Exit status 1 if any suite failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

PORT_LO, PORT_HI = 15000, 32000


def port_slices(n: int) -> list[str]:
    width = (PORT_HI - PORT_LO) // max(n, 1)
    return [f"{PORT_LO + i * width}-{PORT_LO + (i + 1) * width - 1}" for i in range(n)]


class Suite:
    def __init__(self, target: str, ports: str, make_args: list[str], logs: Path):
        self.target, self.ports = target, ports
        self.log_path = logs / f"{target}.log"
        self.cmd = ["make", "--no-print-directory", *make_args, target]
        self.proc: subprocess.Popen | None = None
        self.started = self.seconds = self.cpu = 0.0

    def start(self) -> None:
        env = {**os.environ, "DURABLE_PORT_RANGE": self.ports}
        self.log = open(self.log_path, "w")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     stdin=subprocess.DEVNULL)
        print(f"[suites] {time.strftime('%H:%M:%S')} start {self.target}", flush=True)

    def poll(self) -> int | None:
        # wait4 rather than Popen.poll: its rusage is the suite's CPU time, descendants included.
        pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
        if pid == 0:
            return None
        rc = self.proc.returncode = os.waitstatus_to_exitcode(status)
        self.seconds = time.monotonic() - self.started
        self.cpu = usage.ru_utime + usage.ru_stime
        self.log.close()
        return rc


def report(suite: Suite, rc: int) -> None:
    verdict = "passed" if rc == 0 else f"FAILED (exit {rc})"
    bar = "=" * 20
    print(f"{bar} {suite.target}: {verdict} in {suite.seconds:.0f} s, {suite.cpu:.0f} CPU s {bar}", flush=True)
    sys.stdout.write(suite.log_path.read_text(errors="replace"))
    sys.stdout.flush()


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot (/proc/stat), all cores: what the
    suites' own counts miss (PostgreSQL, MariaDB, processes killed with their parent)."""
    try:
        fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return (sum(fields) - idle) / tick, sum(fields) / tick


def run(targets: list[str], jobs: int, make_args: list[str], logs: Path) -> int:
    logs.mkdir(parents=True, exist_ok=True)
    waiting = [Suite(t, p, make_args, logs) for t, p in zip(targets, port_slices(len(targets)))]
    running: list[Suite] = []
    times, cpu, failed = {}, {}, []
    begin, (busy0, total0) = time.monotonic(), machine_cpu()
    while waiting or running:
        while waiting and len(running) < jobs:
            suite = waiting.pop(0)
            suite.start()
            running.append(suite)
        time.sleep(0.5)
        for suite in list(running):
            rc = suite.poll()
            if rc is None:
                continue
            running.remove(suite)
            times[suite.target], cpu[suite.target] = round(suite.seconds), round(suite.cpu)
            report(suite, rc)
            if rc != 0:
                failed.append(suite.target)
    wall = round(time.monotonic() - begin)
    busy, total = (a - b for a, b in zip(machine_cpu(), (busy0, total0)))
    print(f"[suites] seconds per suite ({jobs} at a time, {wall} s in all): "
          + ", ".join(f"{t} {s}" for t, s in times.items()), flush=True)
    print(f"[suites] CPU seconds per suite ({sum(cpu.values())} in all): "
          + ", ".join(f"{t} {s}" for t, s in cpu.items()), flush=True)
    if total > 0:
        print(f"[suites] the machine: {busy:.0f} CPU s busy of {total:.0f} ({os.cpu_count()} cores), "
              f"{100 * busy / total:.0f}% busy over the run", flush=True)
    if failed:
        print(f"[suites] FAILED: {' '.join(failed)} (logs in {logs})", flush=True)
        return 1
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=3)
    ap.add_argument("--prepared", default="", help="make targets already built: passed as -o to each suite")
    ap.add_argument("--logs", type=Path, default=Path(".suite-logs"))
    ap.add_argument("targets", nargs="+")
    args = ap.parse_args()
    make_args = [a for t in args.prepared.split() for a in ("-o", t)]
    return run(args.targets, args.jobs, make_args, args.logs)


if __name__ == "__main__":
    sys.exit(main())
