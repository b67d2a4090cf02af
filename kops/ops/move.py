"""The unit of a reassignment: one partition's move from its current replicas to its target.

A plain value (no I/O): validation makes one per plan entry (:func:`kops.ops.validate.validate_plan`),
the disk check sizes them and puts them in stages (:mod:`kops.ops.disk_fit`), the journal
stores them, and the engine starts them in waves (:mod:`kops.ops.reassign`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kops.model import TopicPartition


@dataclass(frozen=True, slots=True)
class Move:
    """One partition's change from its current replicas to the target of the plan."""

    topic: str
    partition: int
    original: tuple[int, ...]
    target: tuple[int, ...]
    log_dirs: tuple[str, ...] | None = None
    size_bytes: int | None = None
    #: disk stage (:func:`kops.ops.disk_fit.stage_moves`): a move starts once every move of an earlier stage
    #: has ended, so that the space those free on full brokers is there before data arrives
    stage: int = 0

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(b for b in self.target if b not in self.original)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(b for b in self.original if b not in self.target)

    @property
    def noop(self) -> bool:
        """Nothing to do: the partition already has exactly these replicas in this order."""
        return self.original == self.target and not self.log_dir_moves

    @property
    def moves_data(self) -> bool:
        return bool(self.adding)

    @property
    def involved(self) -> frozenset[int]:
        """Brokers whose concurrency budget this move uses (destinations and brokers drained)."""
        if not self.adding:
            return frozenset()
        return frozenset(self.adding) | frozenset(self.removing)

    @property
    def bytes_to_move(self) -> int:
        return (self.size_bytes or 0) * len(self.adding)

    @property
    def log_dir_moves(self) -> dict[int, str]:
        """Broker -> absolute log dir for the entries that are not ``any``."""
        if not self.log_dirs:
            return {}
        return {b: d for b, d in zip(self.target, self.log_dirs) if d != "any"}

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "topic": self.topic,
            "partition": self.partition,
            "original": list(self.original),
            "target": list(self.target),
        }
        if self.log_dirs is not None:
            d["log_dirs"] = list(self.log_dirs)
        if self.size_bytes is not None:
            d["size_bytes"] = self.size_bytes
        if self.stage:
            d["stage"] = self.stage
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Move:
        return cls(
            topic=d["topic"],
            partition=int(d["partition"]),
            original=tuple(int(b) for b in d["original"]),
            target=tuple(int(b) for b in d["target"]),
            log_dirs=tuple(d["log_dirs"]) if d.get("log_dirs") is not None else None,
            size_bytes=d.get("size_bytes"),
            stage=int(d.get("stage") or 0),
        )
