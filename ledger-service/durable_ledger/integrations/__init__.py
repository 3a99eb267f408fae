"""Gated tools for agent frameworks: one decorator per framework over
the client's step cycle. `agents_sdk` (the OpenAI Agents SDK, extra ``durable-ledger[agents-sdk]``)
and `langgraph` (extra ``durable-ledger[langgraph]``) import their framework; `tools` does not.
Nothing in the rest of the package imports this one."""
