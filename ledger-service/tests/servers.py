"""Real `durable-ledger serve` processes for the ledger's tests: stack/services.py, the one launcher
the stacks and every suite use (own port, own env, /health awaited, process group stopped)."""

from localhost import free_port  # noqa: F401
from services import LedgerServer, ledger_bin

BIN = ledger_bin()

__all__ = ["BIN", "LedgerServer", "free_port"]
