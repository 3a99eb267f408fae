"""The gate: `begin` decides whether a step may run (see decide.py for the whole table)."""

from .run import ROUNDS, begin, request
from .request import MISSING, Answer, BeginRequest, GateConfig

__all__ = ["ROUNDS", "begin", "request", "MISSING", "Answer", "BeginRequest", "GateConfig"]
