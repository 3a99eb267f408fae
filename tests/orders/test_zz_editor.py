"""The orders workflow and one of its sub-workflows (the mailbox lookup, the largest) in the n8n
editor at fit-to-window (1600x900, a laptop screen), in Debian's headless Chromium: every node is on
the canvas and its label readable. Runs after the interruption suite (file name), on the same n8n
user folder with `n8n start`; and the panel of one Gated Sub-Workflow node (Postgres Row) with every
field in view. DURABLE_UPDATE_SCREENSHOTS=1 writes docs/img/orders-pipeline.png,
docs/img/orders-email-find.png and docs/img/gated-subworkflow-panel.png."""
from __future__ import annotations

import json
import time

from orders_stack import SUB_FILES, WORKFLOW_FILE
from pipeline_stack import HERE as STACK, Service, free_port, wait_http
from support.n8n_editor import Editor, require_browser

SHOT = "orders-pipeline.png"
SUB_SHOT = "orders-email-find.png"
PANEL_SHOT = "gated-subworkflow-panel.png"
PANEL_NODE = "Postgres Row"


def node_names(wf: dict) -> list[str]:
    return [n["name"] for n in wf["nodes"] if not n["type"].endswith("stickyNote")]


def test_editor_shows_the_orders_workflow(stack, tmp_path):
    require_browser()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**stack.n8n_env(), "N8N_PORT": str(port), "N8N_LISTEN_ADDRESS": "127.0.0.1"}
    t0 = time.monotonic()
    server = Service("n8n-editor", ["bash", str(STACK / "n8n.sh"), "n8n", "start"], env, stack.workdir / "n8n-editor.log")
    try:
        wait_http(url + "/healthz/readiness", timeout=120, proc=server.proc, log=server.log_path)
        boot = round(time.monotonic() - t0, 1)
        wf = json.loads(WORKFLOW_FILE.read_text())
        sub = json.loads(next(f for f in SUB_FILES if f.name == SUB_SHOT.replace(".png", ".json")).read_text())
        with Editor(url, tmp_path) as editor:
            editor.open_workflow(wf["id"], len(node_names(wf)), must_show=node_names(wf))
            shot = editor.save(tmp_path / SHOT)
            editor.open_workflow(sub["id"], len(node_names(sub)), must_show=node_names(sub))
            sub_shot = editor.save(tmp_path / SUB_SHOT)
        # Tall enough for every field of the panel at once (its column scrolls otherwise).
        with Editor(url, tmp_path, window="1600,1800") as editor:
            editor.open_workflow(wf["id"], len(node_names(wf)))
            editor.open_node(PANEL_NODE)
            box = editor.parameters_box()
            assert box["height"] > 300, box  # the panel opened, with its fields
            panel = editor.save(tmp_path / PANEL_SHOT, clip=box)
        print(f"\nDURABLE_ORDERS editor screenshots {shot} ({len(node_names(wf))} nodes), {sub_shot} "
              f"({len(node_names(sub))} nodes), {panel} ({PANEL_NODE}'s panel), n8n start {boot} s")
    finally:
        server.stop()
