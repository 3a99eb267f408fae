"""The article pipeline end to end: real n8n 2.40.7 running workflows/article-pipeline.json,
the real ledger and publishing proxy, a real WordPress with the durable-ops plugin, the OpenAI
stand-in. One stack per session; every test uses its own job (and its own copy of the workflow,
all imported at once because each n8n CLI start costs seconds)."""
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent

from pipeline_stack import POINTS, PipelineStack  # noqa: E402

ACTIONS = ("upload_media:inline-1", "create_draft", "set_seo", "add_resource_pack")
CASES = [(a, p) for a in ACTIONS for p in POINTS]
EXTRA_JOBS = ("approval",)


def job_for(action, point):
    return f"art-{action.replace(':', '-')}-{point}".replace("_", "-")


def workflow_for(job_id):
    return "wf" + "".join(w[:4] for w in job_id.split("-")[1:])[:18]


@pytest.fixture(scope="session")
def stack(wordpress_site, tmp_path_factory):
    st = PipelineStack(tmp_path_factory.mktemp("pipeline"), wp_state=Path(wordpress_site.state_file),
                       say=lambda m: print(f"[pipeline] {m}"))
    try:
        st.start(ledger_relay=True)
        jobs = [job_for(a, p) for a, p in CASES] + [f"art-{j}" for j in EXTRA_JOBS]
        ids = [workflow_for(j) for j in jobs]
        assert len(set(ids)) == len(ids), ids
        st.import_workflows([st.workflow(w, j) for w, j in zip(ids, jobs)])
        yield st
    finally:
        st.stop()
