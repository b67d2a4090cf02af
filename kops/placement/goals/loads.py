"""The balance goals over a per-broker load: ``replicas`` (replica counts), ``disk-usage`` (bytes,
% of each broker's disk) and ``nw-in-usage`` (bytes-in, % of each broker's NW_IN).

A :class:`Load` tracks the load of a plan in progress per allowed broker, in units of each
broker's share (its capacity, where every broker's is known; else equal shares), and its band:
floor/ceil of the mean for replica counts, the mean ± :func:`~kops.placement.goals.base.band`
for the others. A broker's distance from the band is what a later goal may not grow; its
*room* is the interval of load changes that keep that distance (checked once per broker, then
one comparison per candidate). The first of these goals whose data is there is balanced by
phase 2 (:mod:`kops.placement.balance`); the others by :meth:`Load.optimize`, moving replicas
from brokers above the band to the least used and filling those below it from the most used. Pure.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections import Counter, defaultdict
from itertools import chain, repeat
from math import inf
from operator import neg
from collections.abc import Callable, Iterator, Sequence
from heapq import heapify, heappop, heappush
from typing import Any

from kops.placement.capacity import disk_capacity, shared_disks
from kops.placement.feasible import count_band
from kops.placement.goals.base import EPS, LOOK, Move, Mover, PlanGoal, band, within
from kops.placement.goals.measure import Evaluation, cordon_level, count_bound, off_band, spread
from kops.placement.racks import RackTree
from kops.placement.state import PlacementState, swap_load

__all__ = ["DiskUsageGoal", "Load", "NwInUsageGoal", "ReplicasGoal"]

MIB = 1 << 20
#: swaps: brokers paired with each one outside the band, and replicas looked at on each side
SWAPS = 8
SIZES = "partition sizes (a live read, or a snapshot with size_bytes)"
RATES = "bytes-in rates (cluster describe --sample-seconds N)"


def nearest(a: Sequence[float], b: Sequence[float], even: float, limit: int) -> Iterator[tuple[int, int]]:
    """The first ``limit`` pairs ``(i, j)`` with ``0 < a[i] - b[j] <= 2 * even``, ordered by how near
    ``a[i] - b[j]`` is to ``even`` -- ``abs(a[i] - b[j] - even)``, ties in the order of ``i`` then
    ``j``: the order a stable sort of every such pair by that key gives -- lazily (a swap's search
    mostly takes a few of them). ``a`` does not increase (a broker's heaviest replicas first), so
    for each ``j`` the pairs that pass are a run of ``i`` (found by bisection, with the same
    comparisons), along which ``a[i] - b[j] - even`` does not increase: its distance to 0 grows
    from where it turns negative on, and down from just before there -- where values are equal
    (ties), the run of them given at once, in the order of ``i``. A heap on the sort's key merges them."""
    two = 2 * even
    n = len(a)
    starts: list[int] = []
    ends: list[int] = []
    # (key, i, j, what taking it brings: 1 the next i up, -1 the run of ties below, 0 nothing)
    heap: list[tuple[float, int, int, int]] = []
    for j, x in enumerate(b):
        start = bisect_left(range(n), True, key=lambda i: a[i] - x <= two)
        end = bisect_left(range(n), True, lo=start, key=lambda i: not a[i] - x > 0)
        turn = bisect_left(range(n), True, lo=start, hi=end, key=lambda i: a[i] - x - even < 0)
        starts.append(start)
        ends.append(end)
        if turn < end:
            heap.append((abs(a[turn] - x - even), turn, j, 1))
        if turn > start:
            heap.extend(_ties_below(a, x, even, j, turn, start))
    heapify(heap)
    for _ in range(limit):
        if not heap:
            return
        _key, i, j, then = heappop(heap)
        yield i, j
        if then > 0:
            if i + 1 < ends[j]:
                heappush(heap, (abs(a[i + 1] - b[j] - even), i + 1, j, 1))
        elif then < 0 and i > starts[j]:
            for entry in _ties_below(a, b[j], even, j, i, starts[j]):
                heappush(heap, entry)


def _ties_below(a: Sequence[float], x: float, even: float, j: int, top: int, start: int) -> list[tuple[float, int, int, int]]:
    """:func:`nearest`'s entries of the run of ``i`` just below ``top`` (down to ``start``) whose
    ``a[i] - x - even`` are equal, the lowest (taken first) bringing the run below it."""
    d = a[top - 1] - x - even
    low = top - 1
    while low > start and a[low - 1] - x - even == d:
        low -= 1
    return [(abs(a[i] - x - even), i, j, -1 if i == low else 0) for i in range(low, top)]


def _swap_fits(rooms: list[tuple[tuple[Sequence[float], float, float], tuple[Sequence[float], float, float]]],
               p: int, q: int) -> bool:
    """Does p's replica src -> dst and q's dst -> src keep each earlier load goal, given its rooms
    of src and dst (:meth:`Mover.rooms`): :meth:`Load.keeps2`, with the rooms computed once."""
    for (gw, slo, shi), (_gw, dlo, dhi) in rooms:
        x = gw[p] - gw[q]
        if not (slo <= -x <= shi and dlo <= x <= dhi):
            return False
    return True


class Load(PlanGoal):
    """A per-broker load summed over replicas (disk bytes, network-in bytes/s or replicas) and
    its band, in units of each broker's share (capacity; 1 each where capacities are unknown).
    The band is the plan's target: the mean of the load every partition in scope has at its
    target RF. Kept current by the state (:meth:`moved`)."""

    def __init__(self, st: PlacementState, w: Sequence[float], cap: dict[int, float] | None,
                 lists: Sequence[Sequence[int]] | None = None):
        self.w = w
        ids = st.allowed
        #: shares by capacity (else equal shares: the figures are the load itself)
        self.shares = cap is not None
        self.cap = cap if cap is not None else dict.fromkeys(ids, 1.0)
        self.load = dict.fromkeys(ids, 0.0)
        for p, r in enumerate(st.reps if lists is None else lists):
            for b in r:
                if b in self.load:
                    self.load[b] += w[p]
        total = sum(rf * x for rf, x in zip(st.parts.rf, w))
        if self.name == "replicas":
            n = len(ids)
            self.lo, self.hi = float(int(total) // n), float(-(-int(total) // n))
        else:
            mean = total / sum(self.cap.values()) if self.cap else 0.0
            # cordoned brokers holding less than the others' common level stay where they are (no
            # new replica): the band is around that level, else every other broker would sit above
            # a band none of them can reach and the pass would move nothing
            held = cordon_level(total, ids, {b: self.load[b] for b in st.limits.closed if b in self.load},
                                self.cap) if st.limits.closed else None
            if held is not None:
                mean = max(held[0].values())
            self.lo, self.hi = band(mean, max(w, default=0.0) / min(self.cap.values()), st.band_share)
        self.mean = (self.lo + self.hi) / 2

    def total(self) -> float:
        """How far the brokers are outside the band, summed, in the report's unit (:meth:`scale`)."""
        return sum(map(self.dist, self.load)) * self.scale(self.shares)

    def use(self, b: int) -> float:
        return self.load[b] / self.cap[b]

    def dist(self, b: int, delta: float = 0.0) -> float:
        u = (self.load[b] + delta) / self.cap[b]
        return max(0.0, u - self.hi) + max(0.0, self.lo - u)

    def deltas(self, moves: Sequence[Move]) -> dict[int, float]:
        d: dict[int, float] = defaultdict(float)
        for p, src, dst in moves:
            d[src] -= self.w[p]
            d[dst] += self.w[p]
        return d

    def moved(self, p: int, gone: Sequence[int], came: Sequence[int]) -> None:
        """Partition ``p`` left the brokers ``gone`` and came to ``came`` (:meth:`PlacementState.move`)."""
        load, w = self.load, self.w[p]
        for b in gone:
            if b in load:
                load[b] -= w
        for b in came:
            if b in load:
                load[b] += w

    def swapped(self, p: int, q: int, src: int, dst: int) -> None:
        """p's replica went src -> dst and q's dst -> src: :meth:`moved` of each in turn, in one
        call (each load takes the same two steps in the same order: the same floats)."""
        swap_load(self.load, self.w, p, q, src, dst)

    def fits(self, b: int, delta: float) -> bool:
        """Does changing ``b``'s load by ``delta`` leave it no further from the band (:meth:`room`)?"""
        lo, hi = self.room(b)
        return lo <= delta <= hi

    def keeps1(self, p: int, src: int, dst: int) -> bool:
        w = self.w[p]
        return self.fits(src, -w) and self.fits(dst, w)

    def gain1(self, p: int, src: int, dst: int) -> float:
        return self.gain_by(src, dst, self.w[p])

    def gain_by(self, src: int, dst: int, x: float) -> float:
        """The gain of ``x`` of load going from src to dst (a move: p's weight; a swap: p's less q's)."""
        return self.dist(src) + self.dist(dst) - self.dist(src, -x) - self.dist(dst, x)

    def may_gain(self, src: int, dst: int, upto: float) -> bool:
        """Can some ``x`` in ``(0, upto]`` have a :meth:`gain_by` above :data:`EPS`? False only where
        none can, float rounding included: each broker's distance is convex and piecewise linear in
        ``x`` (flat within the band, slope ``1 / cap`` outside it), so the gain is concave and at
        most its largest value at ``x -> 0`` (0) or where src or dst crosses an edge of the band,
        the only places its slope changes; computed there, it is within a few units in the last
        place of the largest number added (a use, an edge of the band) of the exact figure, as is
        :meth:`gain_by` of any ``x`` -- the margin is 2**-40 of that number, for each."""
        edges, margin = self._edges(src, dst, upto)
        most = max([self.gain_by(src, dst, x) for x in edges], default=0.0)
        return most > EPS - margin

    def past_gain(self, src: int, dst: int, x: float, upto: float) -> bool:
        """Has every ``x'`` in ``[x, upto]`` a :meth:`gain_by` of at most :data:`EPS`? True only
        where the gain's concavity tells (else False, whatever the answer): where it is above EPS
        at an edge of the band below ``x`` and at most EPS less :meth:`may_gain`'s margin at ``x``,
        the exact gain falls from that edge on, so that past ``x`` it is below EPS less the
        margin, and computed, rounding included, at most EPS."""
        edges, margin = self._edges(src, dst, upto)
        if not any(e < x and self.gain_by(src, dst, e) > EPS for e in edges):
            return False
        return self.gain_by(src, dst, x) <= EPS - margin

    def _edges(self, src: int, dst: int, upto: float) -> tuple[list[float], float]:
        """The loads in ``(0, inf)`` moved src -> dst at which src or dst crosses an edge of the
        band (where the gain's slope changes), and the margin of a gain computed for up to
        ``upto`` moved (:meth:`may_gain`)."""
        cs, cd, lo, hi = self.cap[src], self.cap[dst], self.lo, self.hi
        ls, ld = self.load[src], self.load[dst]
        us, ud = ls / cs, ld / cd
        edges = [x for x in ((us - hi) * cs, (us - lo) * cs, (lo - ud) * cd, (hi - ud) * cd) if x > 0]
        big = max(upto, *edges) if edges else upto
        scale = max(abs(hi), abs(lo), (abs(ls) + abs(big)) / cs, (abs(ld) + abs(big)) / cd)
        return edges, 2 * scale * 2.0 ** -40

    def room(self, b: int) -> tuple[float, float]:
        """The changes of ``b``'s load that leave it no further from the band: with ``D`` its
        distance now, ``dist(u') <= D`` exactly when ``lo - D <= u' <= hi + D`` (the distance is
        zero inside the band and grows by one per unit outside it), an interval of deltas that a
        pass computes once per broker and then checks each candidate's weight against."""
        c, x = self.cap[b], self.load[b]
        u, lo, hi = x / c, self.lo, self.hi
        d = (u - hi if u > hi else lo - u if u < lo else 0.0) + EPS
        return (lo - d) * c - x, (hi + d) * c - x

    def gain2(self, p: int, q: int, src: int, dst: int) -> float:
        """p's replica src -> dst and q's dst -> src (a swap)."""
        return self.gain_by(src, dst, self.w[p] - self.w[q])

    def keeps2(self, p: int, q: int, src: int, dst: int) -> bool:
        """p's replica src -> dst and q's dst -> src (a swap)."""
        x = self.w[p] - self.w[q]
        return self.fits(src, -x) and self.fits(dst, x)

    def optimize(self, mover: Mover) -> int:
        """Shed load from the brokers above the band to the least used ones, and fill the brokers
        below it from the most used: per broker the partitions whose weight fits the gap first
        (the largest that does not overshoot), a bounded number of tries each (earlier goals
        refuse many: a partition heavy on an earlier goal's load is tried after a light one)."""
        st, ld = mover.st, self
        made = 0
        guard = next((g for g in mover.guards if isinstance(g, Load)), None)
        gw = guard.w if guard is not None else None
        spread = [g for g in mover.guards if g.checks_leaving]  # (p leaving src: checked once)

        # the weights do not change during the pass: each partition's place in that order (heaviest
        # first; among equals the lightest on the guard, then by index) is computed once
        w = ld.w
        rank = [0] * len(w)
        # (the keys ``(-w[q], gw[q] or 0, q)`` built by ``map`` and ``zip``, not a Python call each)
        keys = zip(map(neg, w), gw if gw else repeat(0), range(len(w)))
        for i, (_w, _g, q) in enumerate(sorted(keys)):
            rank[q] = i

        # each broker's partitions in that order, sorted when first asked for and then kept by
        # this pass's moves (:func:`moved`; the only moves while it runs)
        ranked: dict[int, list[int]] = {}
        by_rank = rank.__getitem__

        def order(b: int, room: float) -> list[int]:
            # the partitions on b fitting the room, in that order: heaviest first, so those that
            # fit (``w[q] / c <= room``) follow those that do not, found by bisection, and those
            # of weight 0 (never taken) come last
            on = ranked.get(b)
            if on is None:
                on = ranked[b] = sorted(st.index.on[b], key=by_rank)
            c = ld.cap[b]
            i = bisect_left(on, -room, key=lambda q: -(w[q] / c))
            return [q for q in on[i:i + LOOK] if w[q] > 0]

        def moved(p: int, src: int, dst: int) -> None:
            for b, gone in ((src, True), (dst, False)):
                on = ranked.get(b)
                if on is not None:
                    if gone:
                        del on[bisect_left(on, rank[p], key=by_rank)]
                    else:
                        insort(on, p, key=by_rank)

        stuck: set[int] = set()  # brokers a whole round found no move for: not tried again
        for _round in range(64):
            if st.budget.hit:
                break
            before = made
            ids = sorted(st.allowed, key=lambda b: (ld.use(b), b))
            over = [b for b in reversed(ids) if ld.use(b) > ld.hi + EPS and b not in stuck]
            under = [b for b in ids if ld.use(b) < ld.lo - EPS and b not in stuck]
            if not over and not under:
                break
            below = [b for b in ids if ld.use(b) < ld.mean]
            above = [b for b in reversed(ids) if ld.use(b) > ld.mean]
            dsts = below[:16]
            for src in over:
                tries, got = 0, made
                srooms = mover.rooms(src)
                for p in order(src, ld.use(src) - ld.lo):
                    if ld.dist(src) <= EPS or tries > 4 * LOOK:
                        break
                    if not within(srooms, p, -1.0) or not all(g.keeps_off(p, src) for g in spread):
                        tries += len(dsts)  # (an earlier goal refuses p leaving src: every dst alike)
                        continue
                    for dst in dsts:
                        tries += 1
                        if within(mover.rooms(dst), p) and mover.try_moves(((p, src, dst),), ld):
                            made += 1
                            moved(p, src, dst)
                            srooms = mover.rooms(src)
                            break
                if made == got:
                    stuck.add(src)
            for dst in under:
                tries, got = 0, made
                drooms = mover.rooms(dst)
                for src in above[:16]:
                    if ld.dist(dst) <= EPS or tries > 4 * LOOK:
                        break
                    room = (ld.hi - ld.use(dst)) * ld.cap[dst] / ld.cap[src]
                    srooms = mover.rooms(src)
                    for p in order(src, room):
                        tries += 1
                        if not within(drooms, p) or not within(srooms, p, -1.0) or \
                                not all(g.keeps_off(p, src) for g in spread):
                            continue  # (an earlier goal refuses the move, as try_moves would)
                        if mover.try_moves(((p, src, dst),), ld):
                            made += 1
                            moved(p, src, dst)
                            drooms, srooms = mover.rooms(dst), mover.rooms(src)
                            if ld.dist(dst) <= EPS:
                                break
                if made == got:
                    stuck.add(dst)
            if made == before:
                break
        if mover.guards and not st.budget.hit:
            made += self._swaps(mover)
        return made

    def _swaps(self, mover: Mover) -> int:
        """Where no single move keeps the earlier goals (replica counts held within floor/ceil,
        say): a replica of a broker outside the band swapped for a lighter one of another broker
        (keeping both brokers' replica counts), the pair whose difference brings them nearest
        each other. Per pair of brokers the :data:`SWAPS` heaviest and lightest replicas."""
        st, ld, w = mover.st, self, self.w
        # each broker's replicas by weight, heaviest first and lightest first ((weight, partition)
        # keys: the order a sort by that key gives), sorted when first asked for and then kept by
        # this pass's swaps (the only moves while it runs)
        neg = [-x for x in w]
        heavies: dict[int, list[tuple[float, int]]] = {}
        lights: dict[int, list[tuple[float, int]]] = {}
        # (the candidates of each broker, as :func:`heaviest` and :func:`lightest` last gave them:
        # kept until a swap changes the broker's lists)
        heads: dict[int, list[int]] = {}
        tails: dict[int, list[int]] = {}

        def first(b: int, cut: dict[int, list[int]], lists: dict[int, list[tuple[float, int]]],
                  key: Callable[[int], float], k: int) -> list[int]:
            # (b's first ``k`` replicas by ``key``, of its sorted list in ``lists``, kept in ``cut``)
            top = cut.get(b)
            if top is None:
                got = lists.get(b)
                if got is None:
                    on = st.index.on[b]
                    got = lists[b] = sorted(zip(map(key, on), on))
                top = cut[b] = [q for _x, q in got[:k]]
            return top

        def heaviest(b: int) -> list[int]:
            return first(b, heads, heavies, neg.__getitem__, 4 * SWAPS)

        def lightest(b: int) -> list[int]:
            return first(b, tails, lights, w.__getitem__, SWAPS)

        def swapped(p: int, src: int, dst: int) -> None:
            """p's replica went src -> dst: the two brokers' sorted lists follow."""
            for by, key in ((heavies, (neg[p], p)), (lights, (w[p], p))):
                got = by.get(src)
                if got is not None:
                    del got[bisect_left(got, key)]
                got = by.get(dst)
                if got is not None:
                    insort(got, key)
            for b in (src, dst):
                heads.pop(b, None)
                tails.pop(b, None)

        # a pair that found no swap is not searched again while nothing it looked at changed: what
        # a try depends on is its two brokers (loads, counts, limits) and its candidates' replica
        # lists (rack safety), and in this pass only its own swaps change them (``tick``: the
        # swaps made so far; per broker and partition, the tick of its last change)
        others = [g for g in mover.guards if not isinstance(g, Load)]
        may_go = st.may_go
        tick = 0
        changed: dict[int, int] = {}
        pchanged: dict[int, int] = {}
        failed: dict[tuple[int, int], int] = {}
        made = 0
        for _round in range(16):
            if st.budget.hit:
                break
            before = made
            ids = sorted(st.allowed, key=lambda b: (ld.use(b), b))
            over = [b for b in reversed(ids) if ld.use(b) > ld.hi + EPS]
            under = [b for b in ids if ld.use(b) < ld.lo - EPS]
            pairs = [(src, dst) for src in over for dst in ids[:SWAPS]]
            pairs += [(src, dst) for dst in under for src in ids[::-1][:SWAPS]]
            tried: set[tuple[int, int]] = set()
            for src, dst in pairs:
                if src == dst or (src, dst) in tried or (ld.dist(src) <= EPS and ld.dist(dst) <= EPS):
                    continue
                tried.add((src, dst))
                cs, cd = ld.cap[src], ld.cap[dst]
                # the weight moved that evens the two brokers' use
                even = (ld.load[src] * cd - ld.load[dst] * cs) / (cs + cd)
                if even <= 0:
                    continue
                heavy, light = heaviest(src), lightest(dst)
                f = failed.get((src, dst))
                if (f is not None and changed.get(src, 0) <= f and changed.get(dst, 0) <= f
                        and max(map(pchanged.get, chain(heavy, light), repeat(0)), default=0) <= f):
                    continue
                if not all(g.swappable(heavy, light, src, dst) for g in others):
                    failed[(src, dst)] = tick  # (no try of the pair can keep an earlier goal)
                    continue
                two = 2 * even
                if not ld.may_gain(src, dst, two):
                    failed[(src, dst)] = tick  # (every try of the pair fails on its gain)
                    continue
                # the hard goals of each side of a swap, as the try would check them (rack safety,
                # the limits: on a decommission most light replicas may not come back to a broker
                # at its disk limit) -- of each light replica here, of a heavy one when first asked;
                # where no light one may come back, every try of the pair fails on it
                back = [may_go(q, dst, src) for q in light]
                hw, lw = [w[p] for p in heavy], [w[q] for q in light]
                # the least difference of a candidate whose light replica may come back (the
                # lightest heavy one above it: ``hw`` does not increase); where none is at most
                # twice ``even``, or the gain is past for it and every larger one, the search
                # finds nothing (Load.past_gain; most searches of the disk-use pass that found none)
                neg_hw = [-x for x in hw]
                least = min([hw[k - 1] - y for y, ok in zip(lw, back) if ok and (k := bisect_left(neg_hw, -y))],
                            default=inf)
                if least > two or ld.past_gain(src, dst, least, two):
                    if not st.budget.hit:  # (as when every try was refused: see below)
                        failed[(src, dst)] = tick
                    continue
                go: dict[int, bool] = {}
                # the candidates: a heavy replica of src and a light one of dst whose difference is
                # at most twice ``even``, the nearest to it first, the first SWAPS**2 (:func:`nearest`);
                # the earlier goals checked here, the load goals by their rooms of the two brokers
                # (once per pair: Load.keeps2 without computing them per swap), the others by
                # their own keeps2, the hard goals by ``back`` and ``go`` -- then the try need not
                # check them again
                rooms = list(zip(mover.rooms(src), mover.rooms(dst)))
                for i, j in nearest(hw, lw, even, SWAPS * SWAPS):
                    p, q = heavy[i], light[j]
                    if not back[j] or not _swap_fits(rooms, p, q):
                        continue
                    ok = True
                    for g in others:  # (``all`` of them, without a generator per candidate)
                        if not g.keeps2(p, q, src, dst):
                            ok = False
                            break
                    if not ok or ld.gain_by(src, dst, w[p] - w[q]) <= EPS:
                        continue  # (no gain: a refusal of the try, found without it)
                    ok = go.get(i)
                    if ok is None:
                        ok = go[i] = may_go(p, src, dst)
                    if not ok:
                        continue
                    if mover.try_moves(((p, src, dst), (q, dst, src)), ld, checked=True, hard=True):
                        made += 2
                        tick += 1
                        swapped(p, src, dst)
                        swapped(q, dst, src)
                        for b in (src, dst):
                            changed[b] = tick
                        pchanged[p] = pchanged[q] = tick
                        break
                else:
                    if not st.budget.hit:  # (refused by the budget: not a failure of the pair)
                        failed[(src, dst)] = tick
            if made == before:
                break
        return made

    # -- what each load goal is made of ----------------------------------------------------------
    @classmethod
    def has_data(cls, st: PlacementState) -> bool:
        return True

    @classmethod
    def weights(cls, st: PlacementState) -> Sequence[float]:
        raise NotImplementedError

    @classmethod
    def capacities(cls, st: PlacementState) -> dict[int, Any] | None:
        """Each allowed broker's capacity for this load (None: no capacities at all)."""
        return None

    @classmethod
    def scale(cls, shares: bool) -> float:
        """From the load's unit (a share of capacity, or the load itself) to the report's."""
        return 100.0 if shares else 1.0

    @classmethod
    def track(cls, st: PlacementState, lists: Sequence[Sequence[int]] | None = None) -> Load | None:
        """The goal tracking ``st`` (its replica lists as they are, or ``lists``; None: its data is
        missing)."""
        if not cls.has_data(st):
            return None
        caps = cls.capacities(st)
        return cls(st, cls.weights(st), caps if caps is not None and all(caps.values()) else None, lists)

    @classmethod
    def phase2(cls, st: PlacementState) -> tuple[list[int], dict[int, int] | None]:
        """What phase 2 balances for this goal: integer weights, and each broker's share where
        capacities differ and every one's is known (None: equal shares, the mean)."""
        w = [int(x) for x in cls.weights(st)]
        caps = cls.capacities(st)
        if caps is None or not caps or any(not v for v in caps.values()) or len(set(caps.values())) == 1:
            return w, None
        return w, {b: int(v) for b, v in caps.items()}


class ReplicasGoal(Load):
    """Replica counts per broker within floor/ceil of the mean."""

    name = "replicas"

    @classmethod
    def weights(cls, st: PlacementState) -> Sequence[float]:
        return [1] * len(st.reps)

    @classmethod
    def track(cls, st: PlacementState, lists: Sequence[Sequence[int]] | None = None) -> Load | None:
        goal = super().track(st, lists)
        if goal is not None and st.loads.primary in ("replicas", "count") and lists is not None:
            # phase 2 balances replica counts: the state's load is this one (the kept replicas
            # now, every move after), shared rather than kept twice
            assert goal.load == st.loads.load
            goal.load = st.loads.load
        return goal

    @classmethod
    def measure(cls, ev: Evaluation) -> dict[str, Any]:
        return count_figures(cls.name, ev, None)


class DiskUsageGoal(Load):
    """Each broker's bytes within the band of the mean: as a share of its disk where every
    broker's is known, else the bytes themselves (equal shares)."""

    name = "disk-usage"

    @classmethod
    def has_data(cls, st: PlacementState) -> bool:
        return st.parts.sizes_known and any(st.parts.size)

    @classmethod
    def weights(cls, st: PlacementState) -> Sequence[float]:
        return st.parts.size

    @classmethod
    def capacities(cls, st: PlacementState) -> dict[int, Any] | None:
        shared = shared_disks(st.topo)
        return {b: disk_capacity(st.topo.broker(b), shared) for b in st.allowed}

    @classmethod
    def scale(cls, shares: bool) -> float:
        return 100.0 if shares else 1.0 / MIB

    @classmethod
    def missing(cls, st: PlacementState) -> str | None:
        return None if st.parts.sizes_known else SIZES

    @classmethod
    def measure(cls, ev: Evaluation) -> dict[str, Any]:
        if not ev.sizes_known:
            return ev.unknown(cls.name, SIZES)
        caps = ev.disk_cap if set(ev.ids) <= set(ev.disk_cap) else None
        unit = ("spread of disk use, percentage points" if caps else "spread of bytes per broker, MiB")
        return usage_figures(ev, cls, unit, "bal-size", caps, ev.largest(ev.size))


class NwInUsageGoal(Load):
    """Each broker's bytes-in within the band of the mean: as a share of its NW_IN where every
    broker's is known, else the bytes-in themselves (equal shares)."""

    name = "nw-in-usage"

    @classmethod
    def has_data(cls, st: PlacementState) -> bool:
        return st.parts.rates_known and any(st.parts.rate)

    @classmethod
    def weights(cls, st: PlacementState) -> Sequence[float]:
        return st.parts.rate

    @classmethod
    def capacities(cls, st: PlacementState) -> dict[int, Any] | None:
        c = {b: st.topo.broker(b).capacity for b in st.allowed}
        return {b: (x.nw_in_bytes_per_s if x is not None else None) for b, x in c.items()}

    @classmethod
    def missing(cls, st: PlacementState) -> str | None:
        return None if st.parts.rates_known else RATES

    @classmethod
    def phase2(cls, st: PlacementState) -> tuple[list[int], dict[int, int] | None]:
        _w, capw = super().phase2(st)  # (milli-bytes/s: integers like every other weight)
        return [int(round(r * 1000)) for r in st.parts.rate], capw

    @classmethod
    def measure(cls, ev: Evaluation) -> dict[str, Any]:
        if not ev.rates_known:
            return ev.unknown(cls.name, RATES)
        caps = ev.in_cap if set(ev.ids) <= set(ev.in_cap) else None
        unit = ("spread of network-in use, percentage points" if caps else "spread of bytes-in per broker, bytes/s")
        return usage_figures(ev, cls, unit, "bal-rate", caps, ev.largest(ev.rate))


def usage_figures(ev: Evaluation, goal: type[Load], unit: str, what: str, caps: dict[int, float] | None,
                  largest: float) -> dict:
    """A balance goal over use: spread before / after (bound 0) in the report's unit, how far the
    brokers are outside the band (``off_band_*``), met when none is (those outside it named)."""
    ids = ev.ids
    cap = caps or dict.fromkeys(ids, 1.0)
    scale = goal.scale(caps is not None)
    before, after = ev.per_broker(what, "before"), ev.per_broker(what, "after")
    ub = {b: before[b] / cap[b] for b in ids}
    ua = {b: after[b] / cap[b] for b in ids}
    mean = sum(after.values()) / sum(cap[b] for b in ids) if ids else 0.0
    # cordoned brokers below the others' common level: the band is around that level (as the
    # plan's, :class:`Load`), and those that kept what they held are not what stops the goal --
    # they take no new replica (the bound says how even the others can be)
    bound, cordon, kept = 0.0, [], set()
    held = ev.cordon_level(sum(after.values()), before, caps)
    if held is not None:
        share, low = held
        mean = max(share.values())
        bound = _fmt((mean - min(share.values())) * scale)
        cordon = [f"broker {b} is cordoned: at most {_fmt(share[b] * scale)}" for b in low]
        kept = {b for b in low if after[b] >= before[b] * (1 - 1e-12)}
    lo, hi = band(mean, largest / min(cap.values(), default=1.0), ev.band_share)
    tol = 1e-12 * max(1.0, abs(hi))
    out_of = [f"broker {b}: {_fmt(v * scale)}" for b, v in sorted(ua.items())
              if not lo - tol <= v <= hi + tol and not (b in kept and v < lo)]
    return ev.figures(goal.name, unit, _fmt(spread(ub.values()) * scale), _fmt(spread(ua.values()) * scale), bound,
                      met=not out_of, blockers=out_of[:10], cordon_bound=cordon[:5], mean=_fmt(mean * scale),
                      band=[_fmt(lo * scale), _fmt(hi * scale)],
                      off_band_before=_fmt(off_band(ub.values(), lo, hi) * scale),
                      off_band_after=_fmt(off_band(ua.values(), lo, hi) * scale))


def count_figures(goal: str, ev: Evaluation, slot: int | None) -> dict:
    """A count per broker (replicas; preferred leaders, slot 0; first followers, slot 1) over the
    partitions balanced: its spread before and after, how far the brokers are outside floor/ceil
    of the mean (``off_band_*``), met within 1 (or the bound where that is more)."""
    cb, ca = ev.counts("before", slot), ev.counts("after", slot)
    total = int(sum(ca.values()))
    n = len(ev.ids)
    lo, hi = (total // n, -(-total // n)) if n else (0, 0)
    bound = count_bound(total, n)
    forcing: tuple[str, ...] = ()
    if slot is None and n:  # replicas: rack safety may keep some brokers above or below the band
        rfs = Counter(len(r) for r in ev.assignment("after", True).values())
        tree = RackTree.build({b: ev.topo.rack_of(b) for b in ev.ids})
        feasible = count_band(tree, ev.ids, rfs)
        bound, forcing = max(bound, feasible.bound), feasible.forcing
    met = spread(ca.values()) <= max(bound, 1)
    # cordoned brokers hold at most what they held (a leader at most its replicas): those held
    # below the common level set the spread's bound, and the goal is met when the others are
    # within 1 (or their rack bound) and those kept what they held
    cordon: list[str] = []
    others = None
    held = ev.cordon_level(total, cb if slot is None else ev.counts("before", None))
    if held is not None:
        share, low = held
        eps = 1e-6
        bound = max(bound, math.ceil(max(share.values()) - eps) - math.floor(min(share.values()) + eps))
        cordon = [f"broker {b} is cordoned: at most {int(share[b])}" for b in low]
        rest = [b for b in ev.ids if b not in low]
        others = int(spread(ca[b] for b in rest))
        allowed = 1
        if slot is None:  # (the rack bound over the others' feasible shares)
            fs = [feasible.share[b] for b in rest]
            allowed = max(1, math.ceil(max(fs) - eps) - math.floor(min(fs) + eps))
        met = others <= allowed and all(ca[b] >= min(cb[b], share[b] - eps) for b in low)
    return ev.figures(goal, "spread (max - min per broker)", int(spread(cb.values())), int(spread(ca.values())),
                      bound, met=met, off_band_before=int(off_band(cb.values(), lo, hi)),
                      off_band_after=int(off_band(ca.values(), lo, hi)),
                      rack_bound=list(forcing[:5]) + ([f"... {len(forcing) - 5} more"] if len(forcing) > 5 else []),
                      cordon_bound=cordon[:5], spread_uncordoned=others)


def _fmt(x: float) -> float:
    return round(x, 1)
