"""One machine-readable line per scenario and variant (`DURABLE_RETRY_SUITE {json}`), collected in
a JSON file across the suite's modules and rendered as Markdown tables beside it
(`$DURABLE_RETRY_RESULTS`, default `$DURABLE_CACHE/retry-suite.json` and `.md`): n8n's retry
buttons per pattern, then the remote that dedupes by Idempotency-Key, before and after."""
from __future__ import annotations

import json
import os
from pathlib import Path

COLUMNS = (("plain", "n8n alone"), ("begin", "Begin Step + Record Outcome"), ("gated", "Gated HTTP Request"))
# a remote that dedupes by Idempotency-Key: before (no Look Up) and after (Remote Dedupes on)
DEDUPE_COLUMNS = (("gated-bare", "before: Gated HTTP Request, no Look Up"),
                  ("gated-dedupe", "after: Remote Dedupes by Key"))


def results_path() -> Path:
    cache = os.environ.get("DURABLE_CACHE") or str(Path.home() / ".cache" / "durable-steps")
    return Path(os.environ.get("DURABLE_RETRY_RESULTS") or Path(cache) / "retry-suite.json")


def record(scenario: str, title: str, variant: str, row: dict):
    """Print the line and keep the row (scenario, variant) in the results file."""
    row = {"scenario": scenario, "title": title, "variant": variant, **row}
    print("\nDURABLE_RETRY_SUITE " + json.dumps(row, sort_keys=True))
    path = results_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = json.loads(path.read_text()) if path.exists() else []
    rows = [r for r in rows if (r["scenario"], r["variant"]) != (scenario, variant)] + [row]
    rows.sort(key=lambda r: r["scenario"])
    path.write_text(json.dumps(rows, indent=1))
    path.with_suffix(".md").write_text(table(rows) + "\n" + table(rows, DEDUPE_COLUMNS, dedupe_cell) + "\n"
                                       + same_event_table(rows))


def recorded() -> list[dict]:
    path = results_path()
    return json.loads(path.read_text()) if path.exists() else []


def cell(row: dict | None) -> str:
    if row is None:
        return "(not run)"
    writes = row["writes"]
    return f"**{writes} write{'s' if writes != 1 else ''}**; {row['what']}"


def dedupe_cell(row: dict | None) -> str:
    """Orders written, people needed (steps in the ledger's review queue), executions green / red."""
    if row is None:
        return "(not run)"
    writes, people = row["writes"], row["people"]
    green = sum(1 for e in row["executions"] if e.endswith(":success"))
    return (f"**{writes} order{'s' if writes != 1 else ''}, {people} {'person' if people == 1 else 'people'}**; "
            f"{green} green, {len(row['executions']) - green} red; {row['what']}")


def table(rows: list[dict], columns=COLUMNS, render=cell) -> str:
    mine = {v for v, _ in columns}
    rows = [r for r in rows if r["variant"] in mine]
    by = {(r["scenario"], r["variant"]): r for r in rows}
    scenarios = sorted({(r["scenario"], r["title"]) for r in rows})
    out = ["| scenario | " + " | ".join(h for _, h in columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for sid, title in scenarios:
        out.append(f"| {title} | " + " | ".join(render(by.get((sid, v))) for v, _ in columns) + " |")
    return "\n".join(out) + "\n"


# the same event many times (test_same_event.py): per case, before (node 1.3) and after (1.5)
SAME_EVENT_COLUMNS = [(op, lk) for op in ("http", "sub", "begin") for lk in ("bare", "lookup")]
SAME_EVENT_TITLES = {"http": "Gated HTTP Request", "sub": "Gated Sub-Workflow", "begin": "Begin + Record"}


def same_event_cell(before: dict | None, after: dict | None) -> str:
    def one(row):
        if row is None:
            return "(not run)"
        return (f"{row['writes']} write{'s' if row['writes'] != 1 else ''}, {row['failed']} red, "
                f"{row['review']} review, wait {row['max_wait_s']:g} s")
    return f"1.3: {one(before)}<br>1.5: **{one(after)}**"


def same_event_table(rows: list[dict]) -> str:
    by = {(r["scenario"], r["variant"]): r for r in rows if r["scenario"].startswith("s-")}
    if not by:
        return ""
    scenarios = sorted({(r["scenario"], r["title"]) for r in rows if r["scenario"].startswith("s-")},
                       key=lambda s: (s[0].split("-", 2)[2], int(s[0].split("-")[1])))
    heads = [f"{SAME_EVENT_TITLES[op]}, Look Up {'on' if lk == 'lookup' else 'off'}" for op, lk in SAME_EVENT_COLUMNS]
    out = ["| the same webhook | " + " | ".join(heads) + " |", "|---" * (len(heads) + 1) + "|"]
    for sid, title in scenarios:
        cells = [same_event_cell(by.get((sid, f"{op}-{lk}-1.3")), by.get((sid, f"{op}-{lk}-1.5")))
                 for op, lk in SAME_EVENT_COLUMNS]
        out.append(f"| {title.removeprefix('(s) the same webhook ')} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"
