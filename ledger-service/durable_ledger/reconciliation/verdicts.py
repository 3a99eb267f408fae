"""What a reconciler may answer. Nothing else: no "probably", no retry-and-see."""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Found:
    """The remote object exists and is bound to this operation key."""

    remote_id: str
    receipt: dict = field(default_factory=dict)
    evidence: dict = field(default_factory=dict)
    kind: str = "found"


@dataclass(frozen=True)
class Absent:
    """Nothing was written. ``definitive`` only when a late original cannot still land twice."""

    definitive: bool
    evidence: dict = field(default_factory=dict)
    kind: str = "absent"


@dataclass(frozen=True)
class Undecidable:
    """The remote cannot prove either way (no plugin, title-only matches): a human decides."""

    evidence: dict = field(default_factory=dict)
    candidates: list = field(default_factory=list)
    kind: str = "undecidable"


class ReconcilerError(Exception):
    """The remote could not be asked (network, 5xx). The operation's state must not change."""
