"""The ledger's app factory for the bench's candidate servers (servers_bench.py): the app
`durable-ledger serve` builds in each process, configured from the environment, the schema
already made by `durable-ledger init-db`."""

from durable_ledger.app import create_app


def create():
    return create_app(init_schema=False)
