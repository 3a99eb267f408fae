"""BEFORE / AFTER of the lookup rule (not in CI): the suite's (a) cases, Gated HTTP Request with its
built-in Look Up, once against the node built from the commit before the match rule and once
against this checkout's build, each in its own n8n 2.40.7 user folder with its own ledger.

    git worktree add /tmp/old 6e16bc5
    (cd /tmp/old/n8n-nodes-durable && ln -s <the cached node_modules> node_modules && npx n8n-node build)
    .venv/bin/python tests/lookups/before_after.py --old /tmp/old/n8n-nodes-durable

Prints the table (per shape, present / absent: verdict, writes at the remote, done without a
write) and writes it to $DURABLE_CACHE/lookups-before-after.md.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parents[1] / "stack")]

from cases import LookupStack, cases, results_dir, run_cases, table  # noqa: E402
from pipeline_stack import REPO  # noqa: E402
from remote import ShapesRemote  # noqa: E402


def measure(pkg: Path, label: str, work: Path) -> list[dict]:
    remote = ShapesRemote()
    st = LookupStack(work / label, node_pkg=pkg)
    try:
        st.start(remote, variants=("a",))
        return [{**r, "column": label} for r in run_cases(st, remote, cases(("a",)))]
    finally:
        remote.close()
        st.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", type=Path, required=True, help="the older n8n-nodes-durable, built (dist/)")
    ap.add_argument("--old-label", default="before (6e16bc5)")
    ap.add_argument("--new", type=Path, default=REPO / "n8n-nodes-durable")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lookups-before-after-") as tmp:
        rows = measure(args.old, "before", Path(tmp)) + measure(args.new, "after", Path(tmp))
    text = table(rows, [("before", f"(a) {args.old_label}"), ("after", "(a) this checkout")])
    print(text)
    for r in rows:
        if r["column"] == "before":
            print(f"before {r['order_id']}: {r['verdict']} writes={r['writes']} reason={r['reason']}")
    out = results_dir()
    out.mkdir(parents=True, exist_ok=True)
    (out / "lookups-before-after.md").write_text(text)


if __name__ == "__main__":
    main()
