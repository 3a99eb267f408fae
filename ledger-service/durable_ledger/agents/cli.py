"""CLI subcommands of the agents module (worker, env snapshot/restore)."""


def register(subparsers):
    """Add this module's subcommands to `durable-ledger`."""
