"""HTTP plumbing both Flask apps (the ledger and the publishing proxy) and every feature's routes
share: the error answers, request context, request schemas, cheap refusals, strict JSON, tracing
and the HTTP server `serve` runs (server.py, waitress). No feature logic."""
