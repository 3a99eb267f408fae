"""A batch of interrupted operations, settled by one sweep: how many resolve on their own, how
many need an editor, and whether WordPress ever holds a duplicate.

    PYTHONPATH=tests:ledger-service:stack .venv/bin/python tests/reconcile/batch_interrupted.py --n 50  # standalone, JSON
    pytest tests/reconcile/batch_interrupted.py                     # the same with a small N

Each operation is one caller process interrupted at a random point:
  before_send   SIGKILL after `begin` (SENT), before the proxy call: nothing reached WordPress
  after_write   SIGKILL after WordPress wrote the draft, before the ledger's confirm (SENT)
  dropped       the response is lost on the wire (netfaults); the caller records UNKNOWN
on the plugin site (`test`, `lossy` = the same WordPress behind the lossy hop) and on the site
without the mu-plugin (`plain`: before_send / after_write only). Then `durable-ledger sweep
--sent-older-than 0s` reconciles them all, every job is resumed once by a fresh caller (which
dispatches the retries the sweep allowed), and WordPress is counted per operation.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


from harness import Caller, Stack, crash_at, resume  # noqa: E402

KINDS = [("test", "before_send"), ("test", "after_write"), ("lossy", "dropped"),
         ("plain", "before_send"), ("plain", "after_write")]
WEIGHTS = [3, 3, 2, 1, 1]
ALL_DROPPED = 10**9


def plan(n, seed):
    rng = random.Random(seed)
    kinds = KINDS[:n] + rng.choices(KINDS, WEIGHTS, k=max(0, n - len(KINDS)))
    rng.shuffle(kinds)
    batch = uuid.uuid4().hex[:8]
    return [{"job_id": f"batch-{batch}-{i:03d}", "title": f"Batch {batch} #{i:03d}", "site": site, "point": point}
            for i, (site, point) in enumerate(kinds)]


def _interrupt(stack, op):
    if op["point"] == "dropped":
        caller = Caller(stack.caller_config(op["job_id"], op["site"], op["title"]))
        done = caller.wait_for("DONE")
        caller.finish()
        assert done["outcome"] == "unknown", done
        op["key"] = done["operation"]["operation_key"]
    else:
        op["key"], _ = crash_at(stack, op["job_id"], op["site"], op["title"], op["point"])
    op["state_after_crash"] = stack.operation(op["key"])["operation"]["state"]


def _posts(stack, op):
    """How many posts WordPress holds for this operation, counted at the source."""
    if op["site"] == "plain":
        return len(stack.drafts_titled("plain", op["title"]))
    return max(len(stack.plugin_job_posts(op["job_id"])), len(stack.drafts_titled("test", op["title"])))


def run_batch(stack, n=50, seed=None, parallel=3, sweep_rate=None):
    seed = int(time.time()) if seed is None else seed
    ops = plan(n, seed)
    t0 = time.monotonic()
    stack.lossy.drop_responses = ALL_DROPPED  # only the `lossy` profile goes through the hop
    try:
        with ThreadPoolExecutor(parallel) as pool:
            list(pool.map(lambda op: _interrupt(stack, op), ops))
    finally:
        stack.lossy.drop_responses = 0
    interrupt_s = time.monotonic() - t0

    tally, sweep_wall_s = stack.sweep(*(["--rate", str(sweep_rate)] if sweep_rate is not None else []))
    ours = {op["key"] for op in ops}
    items = {i["operation_key"]: i for i in tally["items"] if i["operation_key"] in ours}
    for op in ops:
        op["after_sweep"] = stack.operation(op["key"])["operation"]["state"]
        op["sweep_verdict"] = (items.get(op["key"]) or {}).get("verdict")

    t1 = time.monotonic()
    with ThreadPoolExecutor(parallel) as pool:
        decisions = list(pool.map(lambda op: resume(stack, op["job_id"], op["site"], op["title"]), ops))
    resume_s = time.monotonic() - t1
    for op, out in zip(ops, decisions):
        op["resume_decision"] = out["decision"]
        op["final_state"] = (out.get("operation") or {}).get("state")
        op["posts"] = _posts(stack, op)

    auto = [op for op in ops if op["after_sweep"] in ("CONFIRMED", "FAILED")]
    review = [op for op in ops if op["after_sweep"] == "NEEDS_REVIEW"]
    return {
        "n": n, "seed": seed,
        "interrupted": dict(Counter(f"{op['site']}:{op['point']}" for op in ops)),
        "state_after_crash": dict(Counter(op["state_after_crash"] for op in ops)),
        "resolved_automatically": len(auto),
        "resolved_automatically_by_verdict": dict(Counter(op["sweep_verdict"] for op in auto)),
        "went_to_review": len(review),
        "unresolved": n - len(auto) - len(review),
        "duplicates": sum(max(0, op["posts"] - 1) for op in ops),
        "wordpress_posts": sum(op["posts"] for op in ops),
        "plugin_ops_with_exactly_one_post": sum(op["posts"] == 1 for op in ops if op["site"] != "plain"),
        "plugin_ops": sum(op["site"] != "plain" for op in ops),
        "resume_decisions": dict(Counter(op["resume_decision"] for op in ops)),
        "sweep": {"rate_limit_per_s": 20.0 if sweep_rate is None else sweep_rate, "wall_seconds": round(sweep_wall_s, 3), "seconds": tally["seconds"],
                  "examined": tally["examined"], "confirmed": tally["confirmed"],
                  "retry_allowed": tally["retry_allowed"], "needs_review": tally["needs_review"],
                  "errors": tally["errors"], "busy": tally["busy"], "raced": tally["raced"]},
        "seconds": {"interrupt": round(interrupt_s, 2), "resume": round(resume_s, 2)},
        "ops": ops,
    }


def check(result):
    """What must hold for any batch."""
    assert result["duplicates"] == 0, result
    assert result["unresolved"] == 0, result
    assert result["plugin_ops_with_exactly_one_post"] == result["plugin_ops"], result
    for op in result["ops"]:
        if op["site"] == "plain":  # no plugin: never decided by the machine
            assert (op["after_sweep"], op["resume_decision"]) == ("NEEDS_REVIEW", "needs_review"), op
            assert op["posts"] == (1 if op["point"] == "after_write" else 0), op
        else:
            expected = "FAILED" if op["point"] == "before_send" else "CONFIRMED"
            assert op["after_sweep"] == expected, op
            assert op["resume_decision"] == ("dispatch" if expected == "FAILED" else "reuse_receipt"), op
            assert op["final_state"] == "CONFIRMED", op


def test_batch_interrupted_small(stack):
    result = run_batch(stack, n=int(os.environ.get("DURABLE_BATCH_N", "10")), seed=7)
    check(result)
    print("\n[batch] " + json.dumps({k: v for k, v in result.items() if k != "ops"}))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--parallel", type=int, default=3, help="callers interrupted at the same time")
    ap.add_argument("--sweep-rate", type=float, default=None,
                    help="the sweep's --rate (reconciler calls per second; default the sweep's own 20, 0 = unlimited)")
    ap.add_argument("--ops", action="store_true", help="include every operation in the JSON")
    args = ap.parse_args(argv)

    from support.wordpress import _site, start_wordpress, stop_wordpress

    with tempfile.TemporaryDirectory(prefix="durable-batch-") as tmp:
        tmp = Path(tmp)
        started = []
        sites = []
        for plugin, env in ((True, "DURABLE_WP_STATE"), (False, "DURABLE_WP_PLAIN_STATE")):
            if os.environ.get(env):
                sites.append(_site(json.loads(Path(os.environ[env]).read_text())))
            else:
                state = tmp / ("wp.json" if plugin else "wp-plain.json")
                started.append(state)
                sites.append(start_wordpress(state, plugin=plugin))
        try:
            with Stack(tmp, *sites) as stack:
                result = run_batch(stack, args.n, args.seed, args.parallel, args.sweep_rate)
        finally:
            for state in started:
                stop_wordpress(state)
    ok = True
    try:
        check(result)
    except AssertionError as exc:
        ok, result["check_failed"] = False, str(exc)[:2000]
    if not args.ops:
        result.pop("ops")
    print(json.dumps(result, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
