"""The plan's mandatory work (phase 1): what the hard goals and the plan's kind force.

:func:`prepare` fills the state's loads with the replicas each partition keeps (distinct, on
allowed brokers) and finds the partitions that need work: a replica must go (removed, dead or
unlisted broker, a duplicate), the RF changes, or the list is not rack-safe. It also counts what
the lower bound is computed from (:func:`kops.placement.metrics.lower_bound`).

:class:`Repair` then fixes them in ``(topic, partition)`` order: drops extra replicas when the
RF goes down (keeping rack-safety, sparing the leader, from the most loaded broker), adds
replicas up to the RF on the least-loaded allowed broker that keeps the list rack-safe and
within the disk and network limits (preferring the rack of the replica being replaced when it
is as lightly loaded), and moves replicas out of a crowded rack until the list is safe. New
brokers take the slots of those they replace. Under a budget a partition's repair is
all-or-nothing. Pure.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

from kops.errors import BadInput
from kops.placement.state import PlacementState


class OnlyCordonedRoom(BadInput):
    """A partition's forced move has nowhere to go rack-safely but cordoned brokers (``closed``):
    the refusal, with the partition and the brokers for a caller to say it its own way."""

    def __init__(self, topic: str, partition: int, closed: list[int]):
        self.topic, self.partition, self.closed = topic, partition, list(closed)
        super().__init__(f"{topic}-{partition} needs a new replica and only cordoned brokers "
                         f"({', '.join(map(str, self.closed))}) could take it rack-safely; uncordon one "
                         "(kops broker uncordon ID) or plan for fewer brokers")

__all__ = ["Prepared", "Repair", "in_place", "prepare"]


@dataclass
class Prepared:
    #: per partition, the replicas it keeps
    keeps: list[list[int]]
    #: the partitions that need repair, in order
    todo: list[int]
    #: the counts the lower bound is computed from (kept replicas and bytes per broker, ...)
    counts: dict[str, Any]


def prepare(st: PlacementState) -> Prepared:
    """One pass: kept replicas per partition, loads, which partitions need repair, and the
    counts the lower bound is computed from."""
    allowed_set = st.allowed_set
    safe = st.racks.safety.safe_distinct
    loads, size = st.loads, st.parts.size
    load, on, w, rfs = loads.load, st.index.on, loads.w, st.parts.rf
    keeps: list[list[int]] = []
    todo: list[int] = []
    need_total = need_bytes = repairs = repair_bytes = 0
    drop_parts: list[int] = []
    for p, r in enumerate(st.reps):
        rf = rfs[p]
        if len(r) == rf and allowed_set.issuperset(r) and (rf < 2 or len(set(r)) == rf):
            keep = r
            if not safe(keep):
                todo.append(p)
                repairs += 1
                repair_bytes += size[p]
        else:
            keep = _keep(st, p)
            todo.append(p)
            need = rf - len(keep)
            if need > 0:
                need_total += need
                need_bytes += need * size[p]
            elif need < 0:
                drop_parts.append(p)
            elif keep and not safe(keep):
                repairs += 1
                repair_bytes += size[p]
        keeps.append(keep)
        wp = w[p]
        for b in keep:
            load[b] += wp
            on[b][p] = None
    for b in st.allowed:
        loads.rekey(b)
    kb_all = dict(load)  # kept weight per broker (bytes in bytes mode)
    kb_nodrop = dict(load)
    for p in drop_parts:
        for b in keeps[p]:
            kb_nodrop[b] -= w[p]
    kc_all = dict.fromkeys(st.allowed, 0)
    kc_all.update(Counter(chain.from_iterable(keeps)))
    kc_nodrop = dict(kc_all)
    for p in drop_parts:
        for b in keeps[p]:
            kc_nodrop[b] -= 1
    counts = {
        "need_total": need_total,
        "need_bytes": need_bytes,
        "repairs": repairs,
        "repair_bytes": repair_bytes,
        "kc_all": kc_all,
        "kc_nodrop": kc_nodrop,
        "kb_all": kb_all,
        "kb_nodrop": kb_nodrop,
    }
    return Prepared(keeps, todo, counts)


def _keep(st: PlacementState, p: int) -> list[int]:
    seen: set[int] = set()
    keep = []
    for b in st.reps[p]:
        if b in st.allowed_set and b not in seen:
            keep.append(b)
            seen.add(b)
    return keep


class Repair:
    """Phase 1 over a prepared state (see the module doc). ``prefer``: by count, the later goals'
    choice among the brokers still below the target that may take a new replica
    (:class:`kops.placement.balance.Lookahead`); without it, the least loaded."""

    #: brokers below the target looked at for the later goals' choice, per new replica
    LOOKAHEAD = 16

    def __init__(self, st: PlacementState, prefer: Any | None = None):
        self.st = st
        self.prefer = prefer if not st.loads.weighted else None
        #: the partition :meth:`_pick_add` finds a broker for (its disk check needs the size)
        self._placing: int | None = None
        self._repairing = -1  # (the partition whose list is being repaired)
        n = len(st.allowed)
        #: by count, the most a broker holds at the target (a new replica below it costs no balance move)
        self._ceil = -(-sum(st.parts.rf) // n) if n else 0

    def run(self, prep: Prepared) -> None:
        st = self.st
        budget = st.budget
        cost = st.parts.cost
        st.loads.heaps.rebuild(st.allowed)
        # loads count the kept replicas; st.reps[p] stays the original list until repaired
        for p in prep.todo:
            keep = prep.keeps[p]
            old = st.reps[p]
            new = self._repair_list(p, list(keep), old)
            mv, by = cost(p, new)
            if not budget.fits(mv, by):
                if budget.may_force() and mv > 0:
                    budget.forced = True  # force progress: one partition even over budget
                else:
                    budget.hit = True
                    st.unrepaired.add(p)
                    continue
            budget.spend(mv, by)
            # apply: loads currently hold ``keep``; switch them to ``new``
            st.reps[p] = list(keep)
            st.move(p, new)
        prep.keeps = []

    def _pick_add(self, cur: list[int], prefer_leaf: int | None, exclude: Iterable[int] = ()) -> int:
        """Least-loaded allowed broker whose addition keeps ``cur`` rack-safe."""
        st = self.st
        racks, heaps = st.racks, st.loads.heaps
        p_now = self._placing
        # (a cordoned broker takes no new replica: not even where nothing else fits the limits)
        excl = set(cur) | set(exclude) | (st.limits.shut(p_now) if p_now is not None else set(st.limits.closed))
        safe = racks.safety.safe_distinct
        load = st.loads.key
        fits = st.limits.fits

        def accept(b: int) -> int:
            return 1 if b not in excl and safe(cur + [b]) and (p_now is None or fits(b, p_now)) else 0

        best = self._preferred(cur, prefer_leaf, excl) if self.prefer is not None and p_now is not None else None
        if best is not None:
            return best
        best = heaps.ascending(accept)
        if best is None and p_now is not None and st.limits.limited:
            # nowhere within the disk limit: where it is most even (the report names the brokers)
            best = heaps.ascending(lambda b: 1 if b not in excl and safe(cur + [b]) else 0)
        if prefer_leaf is not None and best is not None and racks.leaf[best] != prefer_leaf:
            same = [
                b for b in racks.leaf_members.get(prefer_leaf, ())
                if b not in excl and load[b] <= load[best] and (p_now is None or fits(b, p_now))
            ]
            same.sort(key=lambda b: (load[b], b))
            for b in same:
                if safe(cur + [b]):
                    best = b
                    break
        if best is None:
            best = self._descend(cur, excl)
        return best

    def _preferred(self, cur: list[int], prefer_leaf: int | None, excl: set[int]) -> int | None:
        """The later goals' choice of a broker for a new replica of the partition being placed:
        of the first :attr:`LOOKAHEAD` brokers below the target that may take it (rack-safe,
        within the limits), least loaded first, the one the later goals score best (then the
        rack of the replica it replaces, then the least loaded); None when none is below it."""
        st, p = self.st, self._placing
        racks, loads = st.racks, st.loads
        safe, fits, placing = racks.safety.safe_distinct, st.limits.fits, self.prefer.placing
        key, ceil, leaf = loads.key, self._ceil, racks.leaf
        found: list[tuple[tuple, int]] = []

        def accept(b: int) -> int:
            if key[b] >= ceil or len(found) >= self.LOOKAHEAD:
                return -1
            if b not in excl and safe(cur + [b]) and fits(b, p):
                found.append(((placing(p, b), leaf[b] != prefer_leaf, key[b], b), b))
            return 0

        loads.heaps.ascending(accept)
        return min(found)[1] if found else None

    def _descend(self, cur: Sequence[int], excl: set[int]) -> int:
        """The most even placement level by level (used when ``cur`` itself is not rack-safe)."""
        st = self.st
        tree = st.racks.tree
        load = st.loads.key
        counts = [defaultdict(int) for _ in range(tree.depth)]
        for b in cur:
            for lvl in range(tree.depth):
                counts[lvl][tree.level_of[lvl][b]] += 1
        best_key = None
        best = -1
        for b in st.allowed:
            if b in excl:
                continue
            key = tuple(counts[lvl][tree.level_of[lvl][b]] for lvl in range(tree.depth)) + (load[b], b)
            if best_key is None or key < best_key:
                best_key, best = key, b
        if best < 0:
            if self.st.limits.closed:
                raise self._cordoned()
            raise AssertionError("no broker left to add (feasibility was checked)")
        return best

    def _cordoned(self) -> OnlyCordonedRoom:
        """A partition's forced move has nowhere to go but a cordoned broker."""
        t, n = self.st.parts.tps[self._repairing]
        return OnlyCordonedRoom(t, n, sorted(self.st.limits.closed))

    def _unevenness(self, reps: Sequence[int]) -> tuple[int, ...]:
        tree = self.st.racks.tree
        out = []
        for lvl in range(tree.depth):
            c: dict[tuple[str, ...], int] = defaultdict(int)
            for b in reps:
                c[tree.level_of[lvl][b]] += 1
            out.append(sum(v * v for v in c.values()))
        return tuple(out)

    def _drop_one(self, cur: list[int]) -> int:
        """Which replica to drop when the RF goes down: keep rack-safety, spare the leader."""
        load = self.st.loads.load
        safe = self.st.racks.safety.safe_distinct
        best = None
        best_key = None
        for i, b in enumerate(cur):
            rest = cur[:i] + cur[i + 1 :]
            key = (
                0 if safe(rest) else 1,
                self._unevenness(rest),
                1 if i == 0 else 0,
                -load[b],
                -i,
            )
            if best_key is None or key < best_key:
                best_key, best = key, b
        assert best is not None
        return best

    def _repair_list(self, p: int, keep: list[int], old: Sequence[int]) -> list[int]:
        """The repaired replica list of partition ``p`` (``old``: its current list)."""
        st = self.st
        self._repairing = p
        racks, load = st.racks, st.loads.load
        safe = racks.safety.safe
        rf = st.parts.rf[p]
        cur = list(keep)
        while len(cur) > rf:
            cur.remove(self._drop_one(cur))
        # leaf of each replica being replaced, to prefer in-rack replacements
        gone = [b for b in old if b not in cur]
        gone_leaf = [racks.topo_leaf(b) for b in gone]
        adds: list[int] = []
        i = 0
        while len(cur) + len(adds) < rf:
            prefer = gone_leaf[i] if i < len(gone_leaf) else None
            i += 1
            self._placing = p
            try:
                b = self._pick_add(cur + adds, prefer)
            finally:
                self._placing = None
            adds.append(b)
        new = cur + adds
        # rack repair: move replicas until the list is rack-safe
        guard = 4 * rf * racks.tree.depth + 4
        while not safe(new) and guard > 0:
            guard -= 1
            best = None
            best_key = None
            for j, b in enumerate(new):
                rest = new[:j] + new[j + 1 :]
                c = self._descend(rest, set(new) | st.limits.shut(p))
                cand = rest[:j] + [c] + rest[j:]
                key = (0 if safe(cand) else 1, self._unevenness(cand), -load[b], 1 if j == 0 else 0, c)
                if best_key is None or key < best_key:
                    best_key, best = key, cand
            assert best is not None
            if self._unevenness(best) >= self._unevenness(new) and not safe(best):
                break
            new = best
        if not safe(new) and st.limits.shut(p):
            raise self._cordoned()
        # place the result in the old slots: replacements take the slot of what they replace
        return in_place(old, new)


def in_place(old: Sequence[int], new: Sequence[int]) -> list[int]:
    """Order ``new`` like ``old``: kept brokers stay in their slots, newcomers take freed slots."""
    new_set = set(new)
    incoming = [b for b in new if b not in old]
    out: list[int] = []
    seen: set[int] = set()
    for b in old:
        if b in new_set and b not in seen:
            out.append(b)
            seen.add(b)
        elif incoming:
            nb = incoming.pop(0)
            out.append(nb)
            seen.add(nb)
    out.extend(incoming)
    return out
