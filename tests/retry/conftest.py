"""n8n's Retry of a crashed execution against the ledger: real n8n 2.40.7 (`n8n execute`, then
`n8n start` and its REST API), the real ledger server and a local counting remote."""
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
