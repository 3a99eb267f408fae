"""The article pipeline end to end: real n8n 2.40.7 running workflows/article-pipeline.json,
the real ledger and publishing proxy, a real WordPress with the durable-ops plugin, the OpenAI
stand-in. One stack per session; every test uses its own job and its own copy of the workflow,
all imported at once because each n8n CLI start costs seconds. The interruption cases' copies
start from a production webhook (published through the server, as the owner would): their runs
share one `n8n start` server,
killed once (stack/n8n_server.py); the approval case's copy keeps the Manual Trigger and runs
with `n8n execute`."""
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent

from n8n_server import N8nServer, webhook_triggered  # noqa: E402
from pipeline_stack import POINTS, PipelineStack  # noqa: E402

ACTIONS = ("upload_media:inline-1", "create_draft", "set_seo", "add_resource_pack")
CASES = [(a, p) for a in ACTIONS for p in POINTS]
EXTRA_JOBS = ("approval",)


def job_for(action, point):
    return f"art-{action.replace(':', '-')}-{point}".replace("_", "-")


def workflow_for(job_id):
    return "wf" + "".join(w[:4] for w in job_id.split("-")[1:])[:18]


class PipelineServerStack(N8nServer, PipelineStack):
    """The pipeline stack whose n8n can also run as a server (`n8n start`) on a fixed port."""


@pytest.fixture(scope="session")
def stack(wordpress_site, tmp_path_factory):
    st = PipelineServerStack(tmp_path_factory.mktemp("pipeline"), wp_state=Path(wordpress_site.state_file),
                             say=lambda m: print(f"[pipeline] {m}"))
    try:
        st.start(ledger_relay=True)
        case_jobs = [job_for(a, p) for a, p in CASES]
        extra_jobs = [f"art-{j}" for j in EXTRA_JOBS]
        ids = [workflow_for(j) for j in case_jobs + extra_jobs]
        assert len(set(ids)) == len(ids), ids
        cases = [webhook_triggered(st.workflow(workflow_for(j), j), workflow_for(j)) for j in case_jobs]
        st.import_workflows(cases + [st.workflow(workflow_for(j), j) for j in extra_jobs])
        yield st
    finally:
        st.stop()
