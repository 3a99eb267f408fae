"""DBOS Transact per-step cost on the same database (run in the bench venv, not a dependency).

Prints JSON: {"steps": N, "step_ms": ...}. Usage: python dbos_peer.py DATABASE_URL [N]
"""

import json
import sys
import time

from dbos import DBOS, DBOSConfig

url = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 300

DBOS(config=DBOSConfig(name="durable_bench_peer", system_database_url=url, log_level="WARNING"))


@DBOS.step()
def side_effect(i):
    return {"remote_id": i}


@DBOS.workflow()
def pipeline(count):
    for i in range(count):
        side_effect(i)
    return count


DBOS.launch()
pipeline(20)  # warm up
t0 = time.perf_counter()
pipeline(n)
elapsed = time.perf_counter() - t0
DBOS.destroy()
print(json.dumps({"steps": n, "step_ms": round(elapsed / n * 1000, 3)}))
