"""The gate: `begin` decides whether a step may run (see decide.py for the whole table)."""

from .batch import begin_many
from .request import MISSING, Answer, BeginRequest, GateConfig
from .run import ROUNDS, begin, request

__all__ = ["ROUNDS", "begin", "begin_many", "request", "MISSING", "Answer", "BeginRequest", "GateConfig"]
