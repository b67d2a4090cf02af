"""What an execution ends with: the journal, whether it finished, its exit code and message."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kops.errors import EXIT_FAILURE, EXIT_NOT_DONE, EXIT_OK
from kops.ops.journal import COMPLETE, DONE, FAILED, HALTED, IN_FLIGHT, Journal, MISMATCH, PENDING, REJECTED
from kops.ops.reassign.options import HALT_HEALTH


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
    journal: Journal
    finished: bool
    exit_code: int
    message: str
    notes: list[str] = field(default_factory=list)
    bytes_total: int | None = None
    elapsed_s: float = 0.0

    @classmethod
    def of(cls, j: Journal, *, waited: bool, halt: Halt | None, stalled: str | None, notes: list[str],
           bytes_total: int | None, elapsed_s: float) -> Outcome:
        """Where a run of the engine left the execution ``j``: finished (complete or failed),
        halted (``halt``), started without ``--wait`` (``waited`` False), or not done while
        waiting (``stalled``: why the wait ended early; None: it timed out)."""
        if j.finished:
            code = EXIT_OK if j.state == COMPLETE else EXIT_FAILURE
            msg = (f"execution {j.id} {j.state}: {len(j.moves_in(DONE))}/{len(j.moves)} "
                   "partitions at their target")
            if j.state == FAILED:
                bad = [m.name for m in j.moves_in(MISMATCH, REJECTED)]
                msg += f"; not at target: {', '.join(bad[:20])}"
            return cls(j, True, code, msg, notes, bytes_total, elapsed_s)
        if j.state == HALTED:
            by, reasons = (halt.by, halt.reasons) if halt is not None else (HALT_HEALTH, [])
            return cls(j, False, EXIT_FAILURE,
                       f"execution {j.id} halted by the {by}: " + "; ".join(reasons[:5])
                       + "; moves in flight continue: `kops reassign resume` once fixed, "
                       "or `kops reassign cancel`",
                       notes, bytes_total, elapsed_s)
        c = j.counts()
        if not waited:
            msg = (f"execution {j.id} started: {c.get(IN_FLIGHT, 0)} moving, {c.get(PENDING, 0)} "
                   "waiting for later waves. Follow it with `kops reassign verify`; "
                   + ("drive the remaining waves with `kops reassign resume`." if c.get(PENDING) else
                      "verify removes the throttles once it completes."))
            return cls(j, False, EXIT_OK, msg, notes, bytes_total, elapsed_s)
        states = "; ".join(f"{n} {state.replace('_', ' ')}" for state, n in c.items())
        return cls(j, False, EXIT_NOT_DONE,
                   f"execution {j.id} not done ({stalled or 'timed out'}): {c.get(DONE, 0)}/{len(j.moves)} partitions "
                   f"done ({states}); "
                   "continue with `kops reassign resume`, or `kops reassign cancel`",
                   notes, bytes_total, elapsed_s)

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
            # the rate at the end (--throttle auto: the last it chose) and auto's bounds
            "throttle": j.options.get("throttle"),
            **({"throttle_auto": j.options["throttle_auto"]} if j.options.get("throttle_auto") else {}),
            "notes": self.notes,
            "partitions_detail": [
                {"topic": m.topic, "partition": m.partition, "original": list(m.original),
                 "target": list(m.target), "state": j.progress.get(m.name)}
                for m in j.moves
            ],
        }
