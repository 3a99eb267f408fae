"""The in-process gate: begin + confirm through `durable_ledger.client.LocalLedger`, no HTTP.

One `with job.step(...)` block with its `step.confirm(...)` per iteration, single thread, on
the database the bench's HTTP server uses (a job of its own, so its lease never fences the
HTTP runs). Prints one JSON line:
{"available": true, "n": N, "p50_ms": ..., "p99_ms": ..., "errors": E, "reused": R}
or {"available": false, "reason": "..."} when the client cannot be imported.
Usage: python inprocess_peer.py DATABASE_URL SECONDS [JOB_ID]
"""

import json
import statistics
import sys
import time
import uuid


def main():
    url, seconds = sys.argv[1], float(sys.argv[2])
    job_id = sys.argv[3] if len(sys.argv) > 3 else "bench-inproc"
    try:
        from durable_ledger.client import LocalLedger
    except Exception as exc:  # not written yet, or broken mid-edit: record it, never fake a number
        print(json.dumps({"available": False, "reason": f"{type(exc).__name__}: {exc}"}))
        return
    import durable_ledger

    ledger = LocalLedger(url, tenant="bench", actor="bench")
    job = ledger.job(job_id, owner="bench-worker", ttl_s=3600)
    prefix = uuid.uuid4().hex[:8]
    errors, reused, first_error, consecutive = 0, 0, None, 0

    def one(i):
        nonlocal reused
        with job.step("create_draft", {"n": i}, operation_key=f"inproc-{prefix}-{i}") as step:
            if step.done:  # a fresh key must never be answered from a receipt
                reused += 1
                return False
            step.confirm(remote_id=str(i), receipt={"id": i})
        return True

    lat = []
    i = 0
    warm_until = time.perf_counter() + min(1.0, seconds / 4)
    end = None
    while True:
        now = time.perf_counter()
        if end is None and now >= warm_until:
            end = now + seconds
        if end is not None and now >= end:
            break
        i += 1
        t0 = time.perf_counter()
        try:
            ok = one(i)
        except Exception as exc:
            ok = False
            errors += 1
            consecutive += 1
            first_error = first_error or f"{type(exc).__name__}: {exc}"
            if consecutive >= 20:
                break
        else:
            consecutive = 0
        dt = (time.perf_counter() - t0) * 1000
        if ok and end is not None:
            lat.append(dt)
    close = getattr(ledger, "close", None)
    if callable(close):
        close()
    out = {"available": True, "module": durable_ledger.__file__, "n": len(lat), "errors": errors,
           "reused": reused, "fencing_token": getattr(job, "fencing_token", None)}
    if first_error:
        out["first_error"] = first_error
    if lat:
        lat.sort()
        out["p50_ms"] = round(statistics.median(lat), 3)
        out["p99_ms"] = round(lat[max(0, int(len(lat) * 0.99) - 1)], 3)
        out["ops_per_s"] = round(len(lat) / seconds, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
