"""The retry suite's stack: the real ledger server (SQLite) and a real n8n 2.40.7 server (`n8n start`,
SQLite), no WordPress, proxy or OpenAI. The server half (sign-in, activation, webhooks, Retry,
n8n's execution tables) is stack/n8n_server.py's."""
from __future__ import annotations

from n8n_server import N8nServer
from pipeline_stack import PipelineStack


class RetryStack(N8nServer, PipelineStack):
    """The ledger (SQLite) and n8n on its own SQLite database: no WordPress, proxy or OpenAI."""

    def __init__(self, workdir, say=lambda m: print(f"[retry] {m}")):
        super().__init__(workdir, say=say)
        self.openai_url = "http://127.0.0.1:9/v1"  # the stack's credentials file names one; unused

    def start(self, ledger_relay=False):
        t = self.tokens
        self.start_ledger(f"sqlite:///{self.workdir / 'ledger.db'}",
                          f"demo:runner:{t['runner']},demo:editor:{t['editor']}", threads=4)
        self._prepare_n8n()
        return self
