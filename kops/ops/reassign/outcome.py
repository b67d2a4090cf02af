"""What an execution ends with: the journal, whether it finished, its exit code and message."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kops.ops import journal as J


@dataclass(frozen=True)
class Halt:
    """Why an execution stopped starting waves (the moves in flight continue)."""

    #: what stopped it: :data:`~kops.ops.reassign.options.HALT_HEALTH` or ``HALT_DISK``
    by: str
    #: one line per offending partition or disk
    reasons: list[str]
    #: what the operator is told at once
    note: str


@dataclass
class Outcome:
    journal: J.Journal
    finished: bool
    exit_code: int
    message: str
    notes: list[str] = field(default_factory=list)
    bytes_total: int | None = None
    elapsed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        j = self.journal
        return {
            "execution_id": j.id,
            "state": j.state,
            "finished": self.finished,
            "message": self.message,
            "partitions": len(j.moves),
            "progress": j.counts(),
            "waves": j.waves,
            "bytes_to_move": self.bytes_total,
            "elapsed_s": round(self.elapsed_s, 1),
            "throttles_left": j.throttles.describe(),
            "notes": self.notes,
            "partitions_detail": [
                {"topic": m.topic, "partition": m.partition, "original": list(m.original),
                 "target": list(m.target), "state": j.progress.get(m.name)}
                for m in j.moves
            ],
        }
