"""The ledger's core: plain Python, no Flask. Views call these functions; so do the CLI and tests."""
