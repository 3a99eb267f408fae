"""One machine-readable line per scenario and variant (`DURABLE_RETRY_SUITE {json}`), collected in
a JSON file across the suite's modules and rendered as a Markdown table beside it
(`$DURABLE_RETRY_RESULTS`, default `$DURABLE_CACHE/retry-suite.json` and `.md`)."""
from __future__ import annotations

import json
import os
from pathlib import Path

COLUMNS = (("plain", "n8n alone"), ("begin", "Begin Step + Record Outcome"), ("gated", "Gated HTTP Request"))


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
    path.with_suffix(".md").write_text(table(rows))


def cell(row: dict | None) -> str:
    if row is None:
        return "(not run)"
    writes = row["writes"]
    return f"**{writes} write{'s' if writes != 1 else ''}**; {row['what']}"


def table(rows: list[dict]) -> str:
    by = {(r["scenario"], r["variant"]): r for r in rows}
    scenarios = sorted({(r["scenario"], r["title"]) for r in rows})
    out = ["| scenario | " + " | ".join(h for _, h in COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for sid, title in scenarios:
        out.append(f"| {title} | " + " | ".join(cell(by.get((sid, v))) for v, _ in COLUMNS) + " |")
    return "\n".join(out) + "\n"
