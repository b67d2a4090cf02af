"""Disk stages: the order in which a plan that shuffles data between full brokers can run.

During a move both the source and the destination hold the partition; the source's copy is
deleted only when the move has ended. A plan that moves partition A off a nearly full broker 3
and partition B onto it does not fit *at once* (B would arrive while A is still there), but
fits when A's move ends first. :func:`plan_disk` checks the whole plan (:func:`check_disk`);
when it does not fit at once, it looks for stages — stage 0 the moves that fit now, stage 1
those that fit once stage 0's sources are freed, and so on — and refuses the plan (exit 2,
nothing changed, every figure named) only when no such order exists.

Room per destination log dir is what the disk check allows there (usable bytes minus the
reserve, and below the threshold) less what reassignments already in progress still bring.
A move that ends frees its size on each broker it leaves, counted where that broker has one
log dir (with several, which dir frees is not known, and nothing is credited: never too
optimistic). Brokers whose capacity is unknown are not limited (the disk check warns about
them). Greedy and deterministic: each stage takes the plan's moves in order while they fit.

Pure: moves and a topology in, moves with their stage and the check out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from kops.errors import BadInput
from kops.model import Topology
from kops.ops.move import Move
from kops.ops.validate import (
    DEFAULT_DISK_RESERVE_PCT,
    DEFAULT_DISK_THRESHOLD_PCT,
    DiskCheck,
    _norm,
    check_disk,
    landing_dir,
    validate_disk,
)

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
        validate_disk(moves, topo, reserve_pct=reserve_pct, threshold_pct=threshold_pct, on_disk=on_disk,
                      source=source)  # raises, naming every figure
        raise BadInput(f"{source}: the data would not fit on the destination disks")  # pragma: no cover
    stage_of = {m.tp: i for i, stage in enumerate(staged) for m in stage}
    out = [replace(m, stage=stage_of[m.tp]) for m in moves]
    return out, replace(check, stages=len(staged))
