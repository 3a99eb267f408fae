"""Logging for every process of the ledger (serve's workers, the proxy, sweep, deliver-approvals).

DURABLE_LOG_LEVEL=DEBUG is for our code. Libraries that log what they send stay quieter
whatever the level: peewee logs every statement with its parameters at DEBUG (receipts,
token hashes), urllib3 logs every request line at DEBUG, query string included, and an n8n
resume URL carries its ``signature`` there. Every record then passes the redacting filter
(kernel/secrets.py), which also blanks credential-like query parameters.
"""

import logging

from .secrets import install_log_redaction

FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
QUIETER = {"peewee": logging.INFO, "urllib3": logging.WARNING}


def configure(level):
    logging.basicConfig(level=level, format=FORMAT)
    root = logging.getLogger().getEffectiveLevel()
    for name, floor in QUIETER.items():
        logging.getLogger(name).setLevel(max(floor, root))
    install_log_redaction()
