"""Does this data fit on those disks, and in which stages: the one place that answers it (pure).

A new replica is copied in full onto its destination broker, and the source's copy is deleted
only once the move has ended. So:

- :func:`check_disk` — would the replicas that some moves add fit on their destinations' log
  dirs (usable bytes from DescribeLogDirs, KIP-827), with what reassignments in progress still
  copy there, keeping ``--disk-reserve`` free and the volume under ``--disk-threshold``? Figures
  per destination log dir (:class:`DiskFigure`, :class:`DiskCheck`); what cannot be checked is a
  warning, never a refusal. Run on the whole plan before the first write, and by the engine on
  each later wave.
- :func:`stage_moves` — a plan that shuffles data between full brokers may not fit *at once*
  (partition B arriving on broker 3 while A, leaving it, is still there) but fit when A's move
  ends first: stage 0 the moves that fit now, stage 1 those that fit once stage 0's sources are
  freed, and so on. Room per destination log dir is what the disk check allows there less what
  reassignments already in progress still bring; a move that ends frees its size on each broker
  it leaves, counted where that broker has one log dir (with several, which dir frees is not
  known, and nothing is credited: never too optimistic); brokers whose capacity is unknown are
  not limited. Greedy and deterministic: each stage takes the plan's moves in order while they
  fit.
- :func:`plan_disk` — the preflight's question: the whole plan at once, else in stages, else
  :class:`~kops.errors.BadInput` (exit 2, nothing changed, every overflowing dir named).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from kops.cluster.versions import DISK_CAPACITY, line
from kops.errors import BadInput
from kops.inputs.values import human_bytes
from kops.model import Topology
from kops.ops.move import Move
from kops.placement.goals import DEFAULT_THRESHOLD, shared_disks


def _ids(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in ids)



#: share of each volume's total size the disk check keeps free (``--disk-reserve``), percent
DEFAULT_DISK_RESERVE_PCT = 5.0
#: how full a destination's volume may be at the peak of the move (``--disk-threshold``),
#: percent: the planner's hard disk goal (:data:`kops.placement.goals.DEFAULT_THRESHOLD`)
DEFAULT_DISK_THRESHOLD_PCT = 100.0 * DEFAULT_THRESHOLD


@dataclass(frozen=True, slots=True)
class DiskFigure:
    """The bytes heading for one log dir of one destination broker, and its room."""

    broker: int
    log_dir: str
    #: replicas the plan (or the next wave) adds here
    plan_bytes: int
    #: still to arrive for reassignments already in progress that add replicas here
    in_flight_bytes: int
    usable_bytes: int
    total_bytes: int
    reserve_bytes: int
    offline: bool = False
    #: the volume may be at most this full (percent) at the peak of the move; None: no such
    #: limit here (none asked, or a volume other brokers share, whose use is not this one's)
    threshold_pct: float | None = None

    @property
    def needed_bytes(self) -> int:
        return self.plan_bytes + self.in_flight_bytes

    @property
    def used_bytes(self) -> int:
        return self.total_bytes - self.usable_bytes

    @property
    def threshold_room_bytes(self) -> int | None:
        """What may still be written before the volume passes the threshold (None: no threshold)."""
        if self.threshold_pct is None:
            return None
        return int(self.total_bytes * self.threshold_pct // 100) - self.used_bytes

    @property
    def room_bytes(self) -> int:
        """What may still be written: usable bytes minus the reserve, and no more than the
        threshold allows (0 on an offline dir)."""
        if self.offline:
            return 0
        room = self.usable_bytes - self.reserve_bytes
        limit = self.threshold_room_bytes
        return room if limit is None else min(room, limit)

    @property
    def peak_pct(self) -> float | None:
        """How full the volume is once everything heading here has arrived (nothing is freed
        before the moves end)."""
        return 100.0 * (self.used_bytes + self.needed_bytes) / self.total_bytes if self.total_bytes else None

    @property
    def fits(self) -> bool:
        return self.needed_bytes == 0 or self.needed_bytes <= self.room_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "broker": self.broker, "log_dir": self.log_dir, "needed_bytes": self.needed_bytes,
            "plan_bytes": self.plan_bytes, "in_flight_bytes": self.in_flight_bytes,
            "usable_bytes": self.usable_bytes, "total_bytes": self.total_bytes,
            "reserve_bytes": self.reserve_bytes, "offline": self.offline, "fits": self.fits,
            "threshold_pct": self.threshold_pct, "peak_pct": self.peak_pct,
        }

    def describe(self, reserve_pct: float) -> str:
        """One line naming the broker, the log dir and every figure (exact bytes and readable)."""
        h = human_bytes
        where = f"broker {self.broker} log dir {self.log_dir}" + (" (offline)" if self.offline else "")
        text = (
            f"{where}: needs {self.needed_bytes} bytes ({h(self.needed_bytes)}: {h(self.plan_bytes)} "
            f"to add + {h(self.in_flight_bytes)} in flight), usable {self.usable_bytes} bytes "
            f"({h(self.usable_bytes)}) of {self.total_bytes} total ({h(self.total_bytes)}), "
            f"{_pct(reserve_pct)} reserve {h(self.reserve_bytes)}"
        )
        if self.threshold_pct is not None and self.peak_pct is not None:
            text += f", {self.peak_pct:.1f} % full at the peak (threshold {_pct(self.threshold_pct)})"
        if not self.fits:
            text += f": {h(self.needed_bytes - self.room_bytes)} short"
        return text


@dataclass(frozen=True)
class DiskCheck:
    """The outcome of :func:`check_disk`: figures per destination log dir, and what could not
    be checked (``warnings``: a check that cannot be made never refuses)."""

    figures: tuple[DiskFigure, ...]
    warnings: tuple[str, ...]
    reserve_pct: float
    #: the threshold asked (None: none)
    threshold_pct: float | None = None
    #: destinations on a volume other brokers share: held to the reserve, not the threshold
    shared: tuple[int, ...] = ()
    #: the plan runs in this many disk stages (:func:`stage_moves`): 1 = all at once
    stages: int = 1

    @property
    def overflows(self) -> list[DiskFigure]:
        return [f for f in self.figures if not f.fits]

    def problems(self) -> list[str]:
        return [f.describe(self.reserve_pct) for f in self.overflows]

    def to_dict(self) -> dict[str, Any]:
        return {"reserve_pct": self.reserve_pct, "threshold_pct": self.threshold_pct, "shared": list(self.shared),
                "stages": self.stages,
                "figures": [f.to_dict() for f in self.figures], "warnings": list(self.warnings)}

    def rule(self) -> str:
        """What a destination is held to, in words (the options that set it named)."""
        text = f"keeping {_pct(self.reserve_pct)} of each volume free, --disk-reserve"
        if self.threshold_pct is not None:
            text += f"; at most {_pct(self.threshold_pct)} full at the peak of the move, --disk-threshold"
            if self.shared:
                text += (f", not applied to broker{'s' if len(self.shared) > 1 else ''} {_ids(self.shared)}: "
                         "a volume other brokers of the host share")
        return text


def _pct(p: float) -> str:
    return f"{p:g} %"


def _norm(path: str | None) -> str | None:
    return path.rstrip("/") or "/" if path else path


def landing_dir(broker, where: str | None):
    """The log dir of ``broker`` a replica lands in: the one a plan names (``where``), else
    (``any``: the broker picks) the online dir with the most usable bytes — exact with one log
    dir per broker. None: the broker has no such dir, or no log dirs known."""
    dirs = {_norm(d.path): d for d in (broker.log_dirs if broker else ())}
    if where:
        return dirs.get(_norm(where))
    online = [d for d in dirs.values() if not d.offline]
    if online:
        return max(online, key=lambda d: (d.usable_bytes or 0, d.path))
    return next(iter(dirs.values()), None)


def check_disk(
    moves: Iterable[Move],
    topo: Topology,
    *,
    reserve_pct: float = DEFAULT_DISK_RESERVE_PCT,
    threshold_pct: float | None = DEFAULT_DISK_THRESHOLD_PCT,
    on_disk: Mapping[tuple[str, int, int], tuple[str | None, int]] | None = None,
) -> DiskCheck:
    """Would the replicas that ``moves`` add fit on their destination brokers' disks?

    Per destination broker (one the moves add a replica to) and log dir: the size of every
    replica added there (a plan's ``log_dirs`` entry names the dir; ``any`` lets Kafka pick
    one, counted against the broker's online log dir with the most usable bytes), plus what is
    still to arrive there for reassignments already in progress (``topo``'s adding replicas;
    ``on_disk`` — replica ``(topic, partition, broker)`` -> ``(log dir, bytes)`` already
    copied — is subtracted when known, else they count in full). Nothing is credited for replicas leaving
    a broker: during a move the source and the destination both hold the partition. A dir
    fits when that total is at most its usable bytes minus ``reserve_pct`` % of its total
    bytes (the volume's, from DescribeLogDirs v4, KIP-827), and the volume is then at most
    ``threshold_pct`` % full (None: no threshold). A volume several brokers of one host share
    (:func:`kops.placement.goals.shared_disks`: a local sandbox) is held to the reserve only:
    its use is not the destination's own.

    Brokers whose log dirs or sizes are unknown (not read, Kafka < 3.3, an older snapshot)
    and replicas of unknown size are not checked: each is named in ``warnings``.
    """
    moves = list(moves)
    on_disk = on_disk or {}
    planned = {m.tp for m in moves}
    # broker -> [(explicit log dir or None, bytes, "plan" | "in_flight")]
    incoming: dict[int, list[tuple[str | None, int, str]]] = {}
    unsized: dict[int, list[str]] = {}
    for m in moves:
        for b in m.adding:
            if m.size_bytes is None:
                unsized.setdefault(b, []).append(m.name)
            else:
                incoming.setdefault(b, []).append((m.log_dir_moves.get(b), m.size_bytes, "plan"))
    dests = set(incoming) | set(unsized)
    for p in topo.partitions():
        if p.tp in planned:
            continue
        for b in p.adding_replicas:
            if b not in dests:
                continue  # a broker the moves do not add to: not theirs to check
            if p.size_bytes is None:
                unsized.setdefault(b, []).append(f"{p.topic}-{p.partition} (in flight)")
                continue
            where, have = on_disk.get((p.topic, p.partition, b), (None, 0))
            incoming.setdefault(b, []).append((where, max(p.size_bytes - have, 0), "in_flight"))

    warnings: list[str] = []
    not_read: list[int] = []
    not_reported: list[int] = []
    sums: dict[tuple[int, str], list[int]] = {}  # (broker, dir) -> [plan, in flight]
    dirs_of: dict[int, dict[str, Any]] = {}
    for b in sorted(incoming):
        broker = topo.broker(b)
        dirs = {_norm(d.path): d for d in (broker.log_dirs if broker else ())}
        if not dirs:
            not_read.append(b)
            continue
        dirs_of[b] = dirs
        online = [d for d in dirs.values() if not d.offline]
        if any(not d.capacity_known for d in online):
            not_reported.append(b)
            continue
        for where, nbytes, kind in incoming[b]:
            d = landing_dir(broker, where)
            if d is None:
                warnings.append(
                    f"broker {b} has no log dir {where} (its log dirs: {', '.join(sorted(dirs))}): "
                    "not counted there"
                )
                continue
            acc = sums.setdefault((b, _norm(d.path)), [0, 0])
            acc[0 if kind == "plan" else 1] += nbytes
    figures = []
    shared = shared_disks(topo) if threshold_pct is not None else set()
    for (b, path), (plan_bytes, flight_bytes) in sorted(sums.items()):
        d = dirs_of[b][path]
        total = d.total_bytes or 0
        figures.append(DiskFigure(
            broker=b, log_dir=d.path, plan_bytes=plan_bytes, in_flight_bytes=flight_bytes,
            usable_bytes=d.usable_bytes or 0, total_bytes=total,
            reserve_bytes=-(-int(total * reserve_pct * 100) // 10000),  # ceil(total * pct / 100)
            offline=d.offline, threshold_pct=None if b in shared else threshold_pct,
        ))
    if not_read:
        warnings.append(
            f"free space of broker{'s' if len(not_read) > 1 else ''} {_ids(not_read)} unknown "
            "(log dirs not read: broker down, not answering, or a snapshot without log_dirs): "
            "not checked"
        )
    if not_reported:
        warnings.append(
            f"broker{'s' if len(not_reported) > 1 else ''} {_ids(not_reported)} "
            f"{'do' if len(not_reported) > 1 else 'does'} not report the free space of "
            f"their log dirs ({DISK_CAPACITY.api} v{DISK_CAPACITY.min_version}, {DISK_CAPACITY.kip}: "
            f"Kafka {line(DISK_CAPACITY.since)} or later): not checked"
        )
    for b in sorted(unsized):
        names = unsized[b]
        warnings.append(
            f"broker {b}: size of {len(names)} partition{'s' if len(names) > 1 else ''} it "
            f"receives unknown ({', '.join(names[:5])}{', ...' if len(names) > 5 else ''}): not counted"
        )
    exempt = sorted({f.broker for f in figures if f.threshold_pct is None} & shared)
    return DiskCheck(tuple(figures), tuple(warnings), reserve_pct, threshold_pct, tuple(exempt))


def _refusal(check: DiskCheck, source: str) -> BadInput:
    """A plan the disks take in no order: exit 2, nothing changed, every overflowing dir named
    with its figures."""
    brokers = sorted({f.broker for f in check.overflows})
    return BadInput(
        f"{source}: the data would not fit on the disk of destination broker"
        f"{'s' if len(brokers) > 1 else ''} {_ids(brokers)} ({check.rule()}); nothing was changed",
        details=[
            *check.problems(),
            "needed: the replicas added there plus what reassignments in progress still copy "
            "there; nothing is freed on a broker until its moves end",
        ],
    )


# -- disk stages ----------------------------------------------------------------------------

Key = tuple[int, str]  # (broker, normalised log dir path)


def stage_moves(moves: list[Move], topo: Topology, check: DiskCheck) -> list[list[Move]] | None:
    """The plan's data moves in stages that each fit once the stages before them have ended
    (``check``: the whole plan's disk check, for the room per destination dir); moves that copy
    nothing, or whose size is unknown, go in the first stage. None when no order fits."""
    room: dict[Key, int] = {(f.broker, _norm(f.log_dir)): f.room_bytes - f.in_flight_bytes for f in check.figures}

    def dest_key(m: Move, b: int) -> Key | None:
        d = landing_dir(topo.broker(b), m.log_dir_moves.get(b))
        key = (b, _norm(d.path)) if d is not None else None
        return key if key in room else None  # not checked there: no limit

    def source_key(b: int) -> Key | None:
        broker = topo.broker(b)
        dirs = [d for d in (broker.log_dirs if broker else ()) if not d.offline]
        return (b, _norm(dirs[0].path)) if len(dirs) == 1 and (b, _norm(dirs[0].path)) in room else None

    first = [m for m in moves if not m.moves_data or m.size_bytes is None]
    left = [m for m in moves if m.moves_data and m.size_bytes is not None]
    stages: list[list[Move]] = []
    while left:
        stage, rest = [], []
        for m in left:
            need: dict[Key, int] = {}
            for b in m.adding:
                k = dest_key(m, b)
                if k is not None:
                    need[k] = need.get(k, 0) + (m.size_bytes or 0)
            if all(room[k] >= n for k, n in need.items()):
                for k, n in need.items():
                    room[k] -= n
                stage.append(m)
            else:
                rest.append(m)
        if not stage:
            return None
        for m in stage:  # ended: the brokers it leaves have its size back
            for b in m.removing:
                k = source_key(b)
                if k is not None:
                    room[k] += m.size_bytes or 0
        stages.append(stage)
        left = rest
    if not stages:
        return [first]
    stages[0] = first + stages[0]
    return stages


def plan_disk(
    moves: list[Move],
    topo: Topology,
    *,
    reserve_pct: float = DEFAULT_DISK_RESERVE_PCT,
    threshold_pct: float | None = DEFAULT_DISK_THRESHOLD_PCT,
    on_disk: Mapping[tuple[str, int, int], tuple[str | None, int]] | None = None,
    source: str = "reassignment plan",
) -> tuple[list[Move], DiskCheck]:
    """The plan's moves (each with its disk stage) and its disk check: all in stage 0 when the
    whole plan fits at once; in stages when only an order in which space is freed first fits;
    :class:`BadInput` (exit 2, nothing changed, every overflowing dir named) when neither."""
    check = check_disk(moves, topo, reserve_pct=reserve_pct, threshold_pct=threshold_pct, on_disk=on_disk)
    if not check.overflows:
        return moves, check
    staged = stage_moves(moves, topo, check)
    if staged is None:
        raise _refusal(check, source)
    stage_of = {m.tp: i for i, stage in enumerate(staged) for m in stage}
    out = [replace(m, stage=stage_of[m.tp]) for m in moves]
    return out, replace(check, stages=len(staged))
