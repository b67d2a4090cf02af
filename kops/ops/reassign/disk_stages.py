"""The disk check before a later wave, and the wait of a later disk stage: the execution's
disk-stage tracker.

Before a wave after the first (or the first of a resumed execution): would the wave's new
replicas, with what the moves in flight still copy, fit on their destinations now? One
DescribeLogDirs round reads the brokers' usable bytes, the partitions' sizes and what the
replicas being added hold already; :func:`kops.ops.disk_fit.check_disk` judges. If not, the
execution halts: nothing new starts, the moves in flight continue (a disk filling up mid-move
ends here: ``cancel`` rolls back, ``resume`` checks again).

A wave of a later disk stage whose destinations the moves of the stages before it leave first
waits for that space: it comes back only when the brokers delete the old replicas' files
(``log.segment.delete.delay.ms`` after the move, a minute by default), at most
:data:`SPACE_WAIT_S`, said once.

The cluster is reached only through the ``usage`` function given, so the tracker is tested
without one. Times are ``time.monotonic()`` values passed in by the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from kops.model import Topology
from kops.ops.disk_fit import DiskFigure, check_disk
from kops.ops.move import Move
from kops.ops.reassign.options import HALT_DISK, SPACE_WAIT_S
from kops.ops.reassign.outcome import Halt
from kops.ops.reassign.status import alive

#: DescribeLogDirs of (brokers, topics): a :class:`kops.cluster.topology.LogDirRead` (log dirs
#: with their volumes, replicas with their sizes), None when the brokers could not be asked
Usage = Callable[[list[int], set[str]], Any]


class DiskStages:
    def __init__(self, usage: Usage, *, moves: Sequence[Move], reserve_pct: float, threshold_pct: float | None):
        self._usage = usage
        self._moves = list(moves)  # the whole execution's: which stages free what
        self.reserve_pct = reserve_pct
        self.threshold_pct = threshold_pct
        self._waiting_since: float | None = None  # a later stage's wave waits for space since

    def before_wave(self, topo: Topology, wave: Sequence[Move], *, wave_no: int, now: float,
                    record) -> bool | Halt:
        """True: the wave may start; False: it waits (for the space earlier stages free); a
        :class:`Halt`: it would not fit, the execution stops starting waves. ``record`` hears
        what the check could not check, and the wait."""
        data = [m for m in wave if m.moves_data]
        if not data:
            return True
        dests = {b for m in data for b in m.adding}
        flights = [p for p in topo.partitions() if set(p.adding_replicas) & dests]
        brokers = {b for m in data for b in (*m.original, *m.adding)} | {b for p in flights for b in p.replicas}
        usage = self._usage(sorted(b for b in brokers if alive(topo, b)),
                            {m.topic for m in data} | {p.topic for p in flights})
        if usage is None:
            record.note("disk check skipped before a wave: the brokers' log dirs could not be read "
                        "(DescribeLogDirs)")
            return True
        sizes = usage.partition_sizes()
        current = topo.with_log_dirs(usage.dirs).with_sizes(sizes)
        check = check_disk([replace(m, size_bytes=sizes.get(m.tp, m.size_bytes)) for m in data], current,
                           reserve_pct=self.reserve_pct, threshold_pct=self.threshold_pct,
                           on_disk=usage.on_disk())
        for w in check.warnings:
            record.note(f"disk check: {w}")  # said once, not before every wave
        over = check.overflows
        if not over:
            self._waiting_since = None
            return True
        if self._waits_for_space(wave, over, now, record):
            return False
        reasons = check.problems()
        return Halt(HALT_DISK, reasons, (
            f"stopped before wave {wave_no}: its {len(data)} move(s) would not fit on the disk "
            f"of broker(s) {','.join(str(b) for b in sorted({f.broker for f in over}))} ({check.rule()}): "
            + "; ".join(reasons[:3])
            + ". Moves in flight continue; nothing new is started. Free space, then `kops reassign "
            "resume` (it checks again), or roll back with `kops reassign cancel`."
        ))

    def _waits_for_space(self, wave: Sequence[Move], over: Iterable[DiskFigure], now: float, record) -> bool:
        """True while a later stage's wave waits for what the stages before it free."""
        stage = min(m.stage for m in wave)
        if stage == 0:
            return False
        freeing = {b for m in self._moves if m.stage < stage for b in m.removing}
        blocked = sorted({f.broker for f in over})
        if not set(blocked) <= freeing:
            return False
        if self._waiting_since is None:
            self._waiting_since = now
            record.note(f"disk stage {stage + 1}: waiting for broker(s) {','.join(map(str, blocked))} to free the "
                        "space of the replicas that earlier stages moved away (Kafka deletes them "
                        f"log.segment.delete.delay.ms after the move; at most {SPACE_WAIT_S:.0f} s)")
        return now - self._waiting_since < SPACE_WAIT_S
