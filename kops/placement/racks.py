"""Racks as failure domains, single- or multi-level (``/dc1/r2``).

One place decides what "rack-safe" means; health checks and every planner call it.

Rack ids
    A plain rack id (``a``, ``us-east-1a``) is one level. A rack id that starts with ``/`` is a
    path of failure domains from the top (``/dc1/r2`` = rack r2 in data centre dc1). Paths must
    all have the same depth; mixing paths and plain ids, empty segments or different depths is
    rejected with an explanation (:func:`validate_racks`).

Rack-safe (the rule the planner guarantees and health reports)
    Level by level from the top, a partition's replicas are spread as evenly as the brokers
    allow: inside every domain, no replica could move from a child domain holding ``c`` replicas
    to a sibling holding ``<= c - 2`` that still has a free broker. For flat racks this means:
    a partition spans ``min(RF, racks)`` racks, and when ``RF > racks`` the per-rack counts differ
    by at most one (as far as rack sizes allow).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kops.errors import BadInput

_SEGMENT = re.compile(r"^[A-Za-z0-9_.\-]+$")


def rack_path(rack: str) -> tuple[str, ...]:
    """``/dc1/r2`` -> ``("dc1", "r2")``; a plain id is a one-level path."""
    if rack.startswith("/"):
        return tuple(rack[1:].split("/"))
    return (rack,)


def validate_racks(racks: Mapping[int, str | None], *, require_all: bool = False) -> int:
    """Check broker racks; return the depth (0 when no broker has a rack).

    Raises :class:`BadInput` naming the brokers at fault when racks are malformed, mix paths and
    plain ids, have different depths, or (``require_all``) some brokers have no rack.
    """
    with_rack = {b: r for b, r in racks.items() if r is not None}
    if not with_rack:
        return 0
    missing = sorted(b for b, r in racks.items() if r is None)
    if missing and require_all:
        raise BadInput(
            f"brokers {missing} have no rack while others do; give every broker a rack "
            "(or disable rack awareness)"
        )
    problems: list[str] = []
    paths = {b: r for b, r in with_rack.items() if r.startswith("/")}
    plain = {b: r for b, r in with_rack.items() if not r.startswith("/")}
    if paths and plain:
        problems.append(
            "multi-level racks must all be paths: brokers "
            f"{sorted(plain)} have plain rack ids ({sorted(set(plain.values()))}) while brokers "
            f"{sorted(paths)} have paths like {next(iter(paths.values()))!r}"
        )
    for b, r in sorted(paths.items()):
        segs = r[1:].split("/")
        if any(not s or not _SEGMENT.match(s) for s in segs):
            problems.append(
                f"broker {b}: rack {r!r} is malformed; a rack path is '/' followed by names "
                "(letters, digits, '_', '-', '.') separated by '/', e.g. /dc1/r2"
            )
    for b, r in sorted(plain.items()):
        if not r.strip():
            problems.append(f"broker {b}: empty rack id")
    if not problems and paths:
        depths = Counter(len(rack_path(r)) for r in paths.values())
        if len(depths) > 1:
            by_depth = defaultdict(list)
            for b, r in sorted(paths.items()):
                by_depth[len(rack_path(r))].append(f"{b}={r}")
            desc = "; ".join(f"depth {d}: {', '.join(v[:6])}" for d, v in sorted(by_depth.items()))
            problems.append(
                "multi-level racks must all have the same depth (every broker placed at the same "
                f"level of the hierarchy): {desc}"
            )
    if problems:
        raise BadInput("invalid broker racks", details=problems)
    return max(len(rack_path(r)) for r in with_rack.values())


@dataclass(frozen=True)
class RackTree:
    """The failure-domain hierarchy of a set of brokers.

    ``level_of[L][broker]`` is the broker's domain at level ``L`` (1-based; level ``depth`` is the
    rack itself), as a tuple prefix of its rack path. Brokers without a rack are each their own
    domain (rack-unaware placement).
    """

    depth: int
    level_of: tuple[Mapping[int, tuple[str, ...]], ...]  # index L-1
    capacity: tuple[Mapping[tuple[str, ...], int], ...]  # brokers per domain, index L-1
    paths: bool = False  # rack ids are /paths

    @classmethod
    def build(cls, racks: Mapping[int, str | None]) -> RackTree:
        depth = validate_racks(racks) or 1
        level_of: list[dict[int, tuple[str, ...]]] = [dict() for _ in range(depth)]
        for b, r in racks.items():
            path = rack_path(r) if r is not None else (f"<broker {b}>",) * depth
            for lvl in range(depth):
                level_of[lvl][b] = path[: lvl + 1]
        capacity = tuple(Counter(m.values()) for m in level_of)
        paths = any(r is not None and r.startswith("/") for r in racks.values())
        return cls(depth, tuple(level_of), capacity, paths)

    def rack_violation(self, replicas: Sequence[int]) -> str | None:
        """Why ``replicas`` is not rack-safe over this tree's brokers, or ``None``."""
        return rack_violation(replicas, self)


def domains_under(tree: RackTree, level: int) -> dict[tuple[str, ...], list[tuple[str, ...]]]:
    """The domains of ``tree``'s level ``level`` (1 = the top) grouped by their parent domain."""
    out: dict[tuple[str, ...], list[tuple[str, ...]]] = defaultdict(list)
    for dom in tree.capacity[level - 1]:
        out[dom[:-1]].append(dom)
    return out


def rack_violation(replicas: Sequence[int], tree: RackTree) -> str | None:
    """``None`` when the replicas are spread as evenly as possible at every level, else why.

    Brokers not in the tree (unknown to it) are reported as a violation.
    """
    unknown = [b for b in replicas if b not in tree.level_of[0]]
    if unknown:
        return f"brokers {unknown} are not among the eligible brokers"
    if len(set(replicas)) != len(replicas):
        return f"broker listed twice in {list(replicas)}"
    for level in range(1, tree.depth + 1):
        counts = Counter(tree.level_of[level - 1][b] for b in replicas)
        cap = tree.capacity[level - 1]
        for parent, kids in domains_under(tree, level).items():
            if len(kids) < 2:
                continue
            used = [counts.get(k, 0) for k in kids]
            if sum(used) == 0:
                continue
            hi = max(used)
            # a child with spare brokers holding <= hi - 2 replicas could take one
            for k, c in zip(kids, used):
                if c <= hi - 2 and c < cap[k]:
                    crowded = [_fmt(x, tree.paths) for x, n in zip(kids, used) if n == hi]
                    where = f" within {_fmt(parent, tree.paths)}" if parent else ""
                    return (
                        f"{hi} replicas in {', '.join(crowded)} but only {c} in {_fmt(k, tree.paths)}{where}"
                        f" (replicas {list(replicas)})"
                    )
    return None


def _fmt(dom: tuple[str, ...], paths: bool) -> str:
    if not paths or dom[0].startswith("<"):
        return dom[0]
    return "/" + "/".join(dom)

