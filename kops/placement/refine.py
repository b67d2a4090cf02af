"""Goal passes after the balance phase (issue 21): the soft goals phase 2 did not balance, in
priority order, each by moves that never make a goal before it worse.

Phase 2 of :mod:`kops.placement.balancer` balances one load: the first balance goal of the order
(disk use, network-in use or replica counts). This module then takes the soft goals after it,
one at a time, as Cruise Control does with its goal list:

* **disk-usage**, **nw-in-usage** (a broker's use, % of its capacity; equal shares where
  capacities are unknown): met when every broker is within :func:`kops.placement.goals.band` of the mean use;
* **replicas**: every broker's count within floor/ceil of the mean;
* **topic-spread**: each topic's replicas per broker within floor/ceil of its mean (±1), then
  each topic's preferred leaders likewise, by reordering (after the leader phase).

A pass moves one replica at a time (same slot: the moved replica keeps its place in the list)
from a broker outside the goal's band toward one inside it, and takes a move only when it brings
the goal strictly closer (the summed distance of the two brokers from the band) and leaves every
earlier goal's distance on both brokers no larger -- so a later goal never undoes an earlier one
-- and keeps the hard goals: rack safety, the disk limit at the peak of the move, the network-in
limit, the move budget. Phase 2's goal is guarded with the same bands. Pure; integers and dicts;
no pass scans more than a bounded number of candidates per broker.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from heapq import nsmallest
from itertools import islice, repeat
from operator import truediv
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from kops.placement.balancer import _Planner

from kops.placement.destinations import ByCount
from kops.placement.goals import band
#: candidates looked at per broker and pass: a bound on very large clusters
_LOOK = 256
#: swaps tried per replica of topic spread: destinations, and partitions coming back from each
_PAIR_DSTS, _PAIR_QS = 2, 8
_EPS = 1e-9


Move = tuple[int, int, int]  # (partition, from broker, to broker)


class _Load:
    """A per-broker load summed over replicas (disk bytes, network-in bytes/s or replicas) and
    its band, in units of each broker's share (capacity)."""

    def __init__(self, name: str, pl: _Planner, w: Sequence[float], cap: dict[int, float] | None):
        self.name = name
        self.w = w
        ids = pl.allowed
        self.cap = cap if cap is not None else dict.fromkeys(ids, 1.0)
        self.load = dict.fromkeys(ids, 0.0)
        for p, r in enumerate(pl.reps):
            for b in r:
                if b in self.load:
                    self.load[b] += w[p]
        total = sum(self.load.values())
        if name == "replicas":
            n = len(ids)
            self.lo, self.hi = float(int(total) // n), float(-(-int(total) // n))
        else:
            mean = total / sum(self.cap.values()) if self.cap else 0.0
            self.lo, self.hi = band(mean, max(w, default=0.0) / min(self.cap.values()))
        self.mean = (self.lo + self.hi) / 2

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

    def apply(self, moves: Sequence[Move]) -> None:
        for b, x in self.deltas(moves).items():
            self.load[b] += x

    def fits(self, b: int, delta: float) -> bool:
        """Does changing ``b``'s load by ``delta`` leave it no further from the band (:meth:`room`)?"""
        lo, hi = self.room(b)
        return lo <= delta <= hi

    def keeps1(self, p: int, src: int, dst: int) -> bool:
        w = self.w[p]
        return self.fits(src, -w) and self.fits(dst, w)

    def gain1(self, p: int, src: int, dst: int) -> float:
        w = self.w[p]
        return self.dist(src) + self.dist(dst) - self.dist(src, -w) - self.dist(dst, w)

    def room(self, b: int) -> tuple[float, float]:
        """The changes of ``b``'s load that leave it no further from the band: with ``D`` its
        distance now, ``dist(u') <= D`` exactly when ``lo - D <= u' <= hi + D`` (the distance is
        zero inside the band and grows by one per unit outside it), an interval of deltas that a
        pass computes once per broker and then checks each candidate's weight against."""
        c, x = self.cap[b], self.load[b]
        u, lo, hi = x / c, self.lo, self.hi
        d = (u - hi if u > hi else lo - u if u < lo else 0.0) + _EPS
        return (lo - d) * c - x, (hi + d) * c - x

    def apply1(self, p: int, src: int, dst: int) -> None:
        self.load[src] -= self.w[p]
        self.load[dst] += self.w[p]

    def gain2(self, p: int, q: int, src: int, dst: int) -> float:
        """p's replica src -> dst and q's dst -> src (a swap)."""
        x = self.w[p] - self.w[q]
        return self.dist(src) + self.dist(dst) - self.dist(src, -x) - self.dist(dst, x)

    def keeps2(self, p: int, q: int, src: int, dst: int) -> bool:
        """p's replica src -> dst and q's dst -> src (a swap)."""
        x = self.w[p] - self.w[q]
        return self.fits(src, -x) and self.fits(dst, x)


class _TopicSpread:
    """Each topic's replicas per allowed broker, and its band floor/ceil of the mean."""

    def __init__(self, pl: _Planner):
        self.topic = [tp[0] for tp in pl.tps]
        self.count: dict[str, Counter[int]] = defaultdict(Counter)
        self.parts: dict[str, list[int]] = defaultdict(list)
        allowed = pl.allowed_set
        for p, r in enumerate(pl.reps):
            t = self.topic[p]
            self.parts[t].append(p)
            for b in r:
                if b in allowed:
                    self.count[t][b] += 1
        n = len(pl.allowed)
        self.band = {t: (sum(c.values()) // n, -(-sum(c.values()) // n)) for t, c in self.count.items()}

    def dist(self, key: tuple[str, int], delta: int = 0) -> int:
        t, b = key
        lo, hi = self.band[t]
        c = self.count[t][b] + delta
        return max(0, c - hi) + max(0, lo - c)

    def deltas(self, moves: Sequence[Move]) -> dict[tuple[str, int], int]:
        d: dict[tuple[str, int], int] = defaultdict(int)
        for p, src, dst in moves:
            t = self.topic[p]
            d[(t, src)] -= 1
            d[(t, dst)] += 1
        return d

    def apply(self, moves: Sequence[Move]) -> None:
        for (t, b), x in self.deltas(moves).items():
            self.count[t][b] += x

    # (counts are integers: one replica off a count ``a`` brings it one closer to the band when
    # a > hi, one further when a <= lo; one onto ``b``, closer when b < lo, further when b >= hi)
    def keeps1(self, p: int, src: int, dst: int) -> bool:
        t = self.topic[p]
        return self.keeps_off(p, src) and self.count[t].get(dst, 0) < self.band[t][1]

    def keeps_off(self, p: int, src: int) -> bool:
        """:meth:`keeps1`'s side of ``src``, whatever the destination."""
        t = self.topic[p]
        return self.count[t].get(src, 0) > self.band[t][0]

    def gain1(self, p: int, src: int, dst: int) -> float:
        t = self.topic[p]
        lo, hi = self.band[t]
        get = self.count[t].get
        a, b = get(src, 0), get(dst, 0)
        return (a > hi) - (a <= lo) + (b < lo) - (b >= hi)

    def gain2(self, p: int, q: int, src: int, dst: int) -> float:
        """p's replica src -> dst and q's dst -> src (a swap; of one topic: no change)."""
        if self.topic[p] == self.topic[q]:
            return 0.0
        return self.gain1(p, src, dst) + self.gain1(q, dst, src)

    def apply1(self, p: int, src: int, dst: int) -> None:
        c = self.count[self.topic[p]]
        c[src] -= 1
        c[dst] += 1

    def keeps2(self, p: int, q: int, src: int, dst: int) -> bool:
        return _keeps(self, ((p, src, dst), (q, dst, src)))


def _within(bounds, x: int, sign: float = 1.0) -> bool:
    """``lo <= sign * w[x] <= hi`` for each ``(w, lo, hi)`` of ``bounds`` (rooms: :meth:`Refiner._rooms`)."""
    for w, lo, hi in bounds:
        if not lo <= sign * w[x] <= hi:
            return False
    return True


def _keeps(goal, moves: Sequence[Move]) -> bool:
    """No broker (topic and broker) ends further outside ``goal``'s band."""
    return all(goal.dist(k, x) <= goal.dist(k) + _EPS for k, x in goal.deltas(moves).items())


class Refiner:
    """The goal passes over a planner's state (after repair and phase 2)."""

    def __init__(self, pl: _Planner):
        self.pl = pl
        self.guards: list[Any] = []
        self.moves: dict[str, int] = {}
        # each broker's rooms on the guards that are loads (:meth:`_rooms`); a broker's rooms change
        # only when a move to or from it is made (:meth:`_try`) or a guard is added (:meth:`run`)
        self._room_of: dict[int, list[tuple[Sequence[float], float, float]]] = {}

    def _load(self, goal: str) -> _Load | None:
        pl = self.pl
        from kops.placement.goals import disk_capacity, shared_disks

        if goal == "replicas":
            return _Load(goal, pl, [1] * len(pl.reps), None)
        if goal == "disk-usage":
            if not (pl.sizes_known and any(pl.size)):
                return None
            shared = shared_disks(pl.topo)
            caps = {b: disk_capacity(pl.topo.broker(b), shared) for b in pl.allowed}
            return _Load(goal, pl, pl.size, caps if all(caps.values()) else None)
        if goal == "nw-in-usage":
            if not (pl.rates_known and any(pl.rate)):
                return None
            c = {b: pl.topo.broker(b).capacity for b in pl.allowed}
            caps = {b: (x.nw_in_bytes_per_s if x is not None else None) for b, x in c.items()}
            return _Load(goal, pl, pl.rate, caps if all(caps.values()) else None)
        return None

    def run(self, goals: Sequence[str]) -> dict[str, int]:
        """Replica-moving passes for the soft goals in ``goals`` (phase 2's own goal only guards
        the later ones, unless capacities made its target differ from phase 2's)."""
        pl = self.pl
        for g in goals:
            if pl.budget.hit:
                break
            if g == "topic-spread":
                ts = _TopicSpread(pl)
                self.moves[g] = self._topic_pass(ts)
                self.guards.append(ts)
                self._room_of.clear()
            elif g in ("disk-usage", "nw-in-usage", "replicas"):
                ld = self._load(g)
                if ld is None:
                    continue
                if g != pl.primary:
                    self.moves[g] = self._resource_pass(ld)
                self.guards.append(ld)
                self._room_of.clear()
        return self.moves

    # -- one move (or a swap of two) -------------------------------------------------------------
    def _try(self, moves: Sequence[Move], goal, checked: bool = False, hard: bool = False) -> bool:
        """Make ``moves`` (each: a partition's replica from one broker to another, same slot) if
        together they gain on ``goal`` and keep every hard and earlier goal; returns whether.
        ``checked``: the caller found that they keep every earlier goal (the guards); ``hard``:
        that the first move is rack-safe and within the disk and network limits, as of now
        (:meth:`_takers`)."""
        pl = self.pl
        for p, src, dst in moves:
            r = pl.reps[p]
            if dst in r or src not in r or p in pl.unrepaired:
                return False
        if len(moves) == 1:
            p, src, dst = moves[0]
            if goal.gain1(p, src, dst) <= _EPS:
                return False
            if not checked:
                for g in self.guards:
                    if not g.keeps1(p, src, dst):
                        return False
        else:
            (p, src, dst), (q, _d, _s) = moves
            if not checked:
                for g in self.guards:  # (the guards first: they refuse most swaps, cheaply)
                    if not g.keeps2(p, q, src, dst):
                        return False
            if goal.gain2(p, q, src, dst) <= _EPS:
                return False
        news = [[dst if b == src else b for b in pl.reps[p]] for p, src, dst in moves]
        cost_mv = cost_by = 0
        for i, ((p, _src, dst), new) in enumerate(zip(moves, news)):
            if not (hard and i == 0) and \
                    (not pl.safety.safe_distinct(new) or (pl.limited and not pl._fits_disk(dst, p))):
                return False
            mv, by = pl._cost(p, new)
            omv, oby = pl._cost(p, pl.reps[p])
            cost_mv += mv - omv
            cost_by += by - oby
        if not pl.budget.fits(cost_mv, cost_by):
            pl.budget.hit = True
            return False
        pl.budget.spend(cost_mv, cost_by)
        for (p, _src, _dst), new in zip(moves, news):
            pl._set_replicas(p, new)
        if len(moves) == 1:
            goal.apply1(*moves[0])
            for g in self.guards:
                g.apply1(*moves[0])
        else:
            goal.apply(moves)
            for g in self.guards:
                g.apply(moves)
        for _p, src, dst in moves:
            self._room_of.pop(src, None)
            self._room_of.pop(dst, None)
        return True

    def _rooms(self, b: int) -> list[tuple[Sequence[float], float, float]]:
        """Per earlier goal that is a load: its weights and ``b``'s room (:meth:`_Load.room`) --
        a move of partition p off b keeps the goal iff ``lo <= -w[p] <= hi``, onto b iff
        ``lo <= w[p] <= hi``. (A necessary check: other guards are checked by :meth:`_try`.)
        Kept per broker until a move changes its load."""
        r = self._room_of.get(b)
        if r is None:
            r = self._room_of[b] = [(g.w, *g.room(b)) for g in self.guards if isinstance(g, _Load)]
        return r

    # -- a balance goal ------------------------------------------------------------------------
    def _resource_pass(self, ld: _Load) -> int:
        """Shed load from the brokers above the band to the least used ones, and fill the brokers
        below it from the most used: per broker the partitions whose weight fits the gap first
        (the largest that does not overshoot), a bounded number of tries each (earlier goals
        refuse many: a partition heavy on an earlier goal's load is tried after a light one)."""
        pl = self.pl
        made = 0
        guard = next((g for g in self.guards if isinstance(g, _Load)), None)
        gw = guard.w if guard is not None else None
        spread = [g for g in self.guards if isinstance(g, _TopicSpread)]  # (p leaving src: checked once)

        # the weights do not change during the pass: each partition's place in that order (heaviest
        # first; among equals the lightest on the guard, then by index) is computed once
        w = ld.w
        rank = [0] * len(w)
        for i, q in enumerate(sorted(range(len(w)), key=lambda q: (-w[q], gw[q] if gw else 0, q))):
            rank[q] = i

        def order(b: int, room: float) -> list[int]:
            # the partitions on b fitting the room, in that order
            c = ld.cap[b]
            fit = [q for q in pl.on[b] if w[q] > 0 and w[q] / c <= room]
            fit.sort(key=rank.__getitem__)
            return fit[:_LOOK]

        stuck: set[int] = set()  # brokers a whole round found no move for: not tried again
        for _round in range(64):
            if pl.budget.hit:
                break
            before = made
            ids = sorted(pl.allowed, key=lambda b: (ld.use(b), b))
            over = [b for b in reversed(ids) if ld.use(b) > ld.hi + _EPS and b not in stuck]
            under = [b for b in ids if ld.use(b) < ld.lo - _EPS and b not in stuck]
            if not over and not under:
                break
            below = [b for b in ids if ld.use(b) < ld.mean]
            above = [b for b in reversed(ids) if ld.use(b) > ld.mean]
            dsts = below[:16]
            for src in over:
                tries, got = 0, made
                srooms = self._rooms(src)
                for p in order(src, ld.use(src) - ld.lo):
                    if ld.dist(src) <= _EPS or tries > 4 * _LOOK:
                        break
                    if not _within(srooms, p, -1.0) or not all(g.keeps_off(p, src) for g in spread):
                        tries += len(dsts)  # (an earlier goal refuses p leaving src: every dst alike)
                        continue
                    for dst in dsts:
                        tries += 1
                        if _within(self._rooms(dst), p) and self._try(((p, src, dst),), ld):
                            made += 1
                            srooms = self._rooms(src)
                            break
                if made == got:
                    stuck.add(src)
            for dst in under:
                tries, got = 0, made
                drooms = self._rooms(dst)
                for src in above[:16]:
                    if ld.dist(dst) <= _EPS or tries > 4 * _LOOK:
                        break
                    room = (ld.hi - ld.use(dst)) * ld.cap[dst] / ld.cap[src]
                    srooms = self._rooms(src)
                    for p in order(src, room):
                        tries += 1
                        if not _within(drooms, p) or not _within(srooms, p, -1.0) or \
                                not all(g.keeps_off(p, src) for g in spread):
                            continue  # (an earlier goal refuses the move, as _try would)
                        if self._try(((p, src, dst),), ld):
                            made += 1
                            drooms, srooms = self._rooms(dst), self._rooms(src)
                            if ld.dist(dst) <= _EPS:
                                break
                if made == got:
                    stuck.add(dst)
            if made == before:
                break
        return made

    # -- topic spread --------------------------------------------------------------------------
    def _topic_pass(self, ts: _TopicSpread) -> int:
        pl = self.pl
        made = 0
        allowed = pl.allowed
        # destinations are tried least used first on the earlier goals' first load (keeps them)
        first = next((g for g in self.guards if isinstance(g, _Load)), None)
        fload, fcap = (first.load, first.cap) if first is not None else (None, None)

        def uneven(t: str) -> bool:
            lo, hi = ts.band[t]
            get = ts.count[t].get
            cs = [get(b, 0) for b in allowed]
            return min(cs) < lo or max(cs) > hi

        todo = sorted(ts.parts)
        # a swap evens one topic with a replica of another coming back: a topic evened earlier in
        # the sweep may be uneven again at its end, so the topics still uneven get another sweep
        for _sweep in range(3):
            sweep_made = made
            for t in todo:
                lo, hi = ts.band[t]
                cnt = ts.count[t]
                if not uneven(t):
                    continue
                get = cnt.get
                failed: set[tuple[int, int]] = set()  # (a later round of the topic gives them no new taker)
                for _round in range(3):
                    # the first brokers below the band's top by (count, first load's use, id): keys built
                    # by map and zip (no call per broker), the smallest taken (no sort of them all)
                    counts = map(get, allowed, repeat(0))
                    if fload is not None:
                        uses = map(truediv, map(fload.__getitem__, allowed), map(fcap.__getitem__, allowed))
                        keys = zip(counts, uses, allowed)
                    else:
                        keys = zip(counts, allowed)
                    under = [k[-1] for k in nsmallest(_LOOK, (k for k in keys if k[0] < hi))]
                    short = bool(under) and get(under[0], 0) < lo  # a broker below the band
                    head = ByCount(under, cnt, pl._disk_takes_none(ts.parts[t]))
                    progressed = False
                    for p in ts.parts[t]:
                        for src in list(pl.reps[p]):
                            if src not in pl.allowed_set or (p, src) in failed:
                                continue
                            c = get(src, 0)
                            # in the band: moved only to fill a broker below it, from above the floor
                            if lo <= c <= hi and not (c > lo and short):
                                continue
                            dst = self._even_one(ts, p, src, head)
                            if dst is not None:
                                head.moved(src, dst)
                                made += 1
                                progressed = True
                                short = bool(under) and get(under[0], 0) < lo
                            else:
                                failed.add((p, src))
                            if pl.budget.hit:
                                return made
                    if not progressed:
                        break
            if made == sweep_made:
                break
            todo = [t for t in todo if uneven(t)]
        return made

    def _even_one(self, ts: _TopicSpread, p: int, src: int, head: ByCount) -> int | None:
        """Move p's replica on src to a broker where its topic is short; where that alone would
        make an earlier goal worse (replica counts held at floor/ceil, disks in their band), swap
        it for a replica of another topic coming back, which keeps the brokers' loads. Returns the
        broker the replica went to, or None when nothing moved.

        The earlier goals are checked by interval (:meth:`_Load.room`): once per broker, then one
        comparison per goal and candidate."""
        pl = self.pl
        t = ts.topic[p]
        most = ts.count[t][src] - 2  # (the walk: the round's destinations holding at most this many)
        srooms = self._rooms(src)
        checked = len(srooms) == len(self.guards)  # (every guard is a load: the rooms check them all)
        # the earlier goals' side of src does not depend on the destination: checked once; the
        # destinations' rooms first (on a large cluster most of the walk's brokers sit at the top
        # of the network-in band), then the hard checks (passed: _try does not repeat them)
        if _within(srooms, p, -1.0):
            rooms = self._rooms
            for dst in self._takers(p, src, (d for d in head.upto(most) if _within(rooms(d), p))):
                if ts.gain1(p, src, dst) <= _EPS:
                    continue  # (e.g. off a broker above the band onto one at its top: _try refuses it)
                if self._try(((p, src, dst),), ts, checked, hard=True):
                    return dst
        if not self.guards:
            return None
        # a swap: with the walk's first brokers that pass the hard checks, whatever their rooms
        cands = list(islice(self._takers(p, src, head.upto(most)), _PAIR_DSTS))
        for dst in cands:
            # the swap's net change x = w(p) - w(q) moves src by -x and dst by +x: per goal, the
            # interval both rooms allow
            xs = [(w, w[p] - min(-slo, dhi), w[p] - max(-shi, dlo))  # bounds on w(q)
                  for (w, slo, shi), (_w, dlo, dhi) in zip(srooms, self._rooms(dst))]
            looked = 0
            for q in pl.on[dst]:
                if ts.topic[q] == t or src in pl.reps[q]:
                    continue
                looked += 1
                if looked > _PAIR_QS:
                    break
                if _within(xs, q) and self._try(((p, src, dst), (q, dst, src)), ts, checked, hard=True):
                    return dst
        return None

    def _takers(self, p: int, src: int, short: Iterator[int]) -> Iterator[int]:
        """The first brokers of ``short`` (those of the round's destination list holding few
        enough replicas of p's topic, :meth:`ByCount.upto`; for a direct move, those of them with
        room on the earlier goals) that may take p's replica on src at all: not holding p,
        rack-safe, within the disk and network limits (the hard checks of :meth:`_try`)."""
        pl = self.pl
        r = pl.reps[p]
        fits = pl._fits_disk if pl.limited else None
        safe = pl.safety.replacing(r, src)
        found = 0
        for d in short:
            if d in r or (fits is not None and not fits(d, p)) or not safe(d):
                continue
            yield d
            found += 1
            if found >= _LOOK // 8:
                return

    # -- leadership, by reordering (after the leader phase) -----------------------------------
    def leadership(self, goals: Sequence[str]) -> dict[str, int]:
        """The leadership goals after the leader phase, in ``goals``' order: ``leader-bytes-in``
        (each broker's leaders' bytes-in within its band) and the leader half of
        ``topic-spread`` (each topic's preferred leaders per broker within floor/ceil of its
        mean). A step swaps a partition's leader with one of its followers -- alone, or paired
        with the opposite swap in a partition the follower leads and the leader follows, which
        keeps every broker's leader count -- where it gains on the goal and leaves the leader and
        first-follower counts (where those goals are on) within their floor/ceil band and every
        earlier leadership goal no worse: leadership goals act inside the cluster's leader
        balance, never at its cost. Returns the swaps per goal."""
        pl = self.pl
        reps = pl.reps
        n = len(pl.allowed)
        topic = [tp[0] for tp in pl.tps]
        rate = pl.rate
        scope = [p for p in range(len(reps)) if p not in pl.unrepaired and len(reps[p]) > 1]
        led_by = _LedBy(reps, scope, topic)

        guards: list[_Counts] = []
        for g, slot in (("leaders", 0), ("first-followers", 1)):
            if g in goals:
                c = Counter(r[slot] for r in reps if len(r) > slot)
                total = sum(1 for r in reps if len(r) > slot)
                guards.append(_Counts(slot, c, (total // n, -(-total // n))))
        made: dict[str, int] = {}
        for g in goals:
            if g == "leader-bytes-in" and pl.rates_known and any(rate):
                obj: _Counts = _Counts("lbi", Counter(), None, weight=rate)
                for p in scope:
                    obj.count[reps[p][0]] += rate[p]
                obj.band = band(sum(obj.count.values()) / n, max(rate))
                made[g] = self._lead_pass(obj, guards, led_by, scope)
                guards.append(obj)
            elif g == "topic-spread":
                lead = Counter((topic[p], reps[p][0]) for p in scope)
                per_topic = Counter(topic[p] for p in scope)
                obj = _Counts("topic", lead, None, topic=topic,
                              bands={t: (k // n, -(-k // n)) for t, k in per_topic.items()})
                made["topic-spread leaders"] = self._lead_pass(obj, guards, led_by, scope)
                guards.append(obj)
        return made

    def _lead_pass(self, obj: _Counts, guards: list[_Counts], led_by: _LedBy, scope: list[int]) -> int:
        pl = self.pl
        reps, allowed = pl.reps, pl.allowed_set

        def try_swaps(swaps) -> bool:
            if obj.gain(swaps, reps) <= _EPS:
                return False
            if not all(g.keeps(swaps, reps) for g in guards):
                return False
            for g in (obj, *guards):
                g.apply(swaps, reps)
            for p, i in swaps:
                r = reps[p]
                led_by.drop(p, r)
                new = list(r)
                new[0], new[i] = r[i], r[0]
                pl._set_replicas(p, new)
                led_by.add(p, new)
            return True

        made = 0
        for _round in range(8):
            before = made
            for p in obj.candidates(scope, reps):
                r = reps[p]
                a = r[0]
                if not obj.over(p, a):
                    continue
                for i in sorted(range(1, len(r)), key=lambda j: obj.level(p, r[j])):
                    b = r[i]
                    if b not in allowed or not obj.worth(p, a, b):
                        continue
                    if try_swaps(((p, i),)):
                        made += 1
                        break
                    # paired with a partition b leads and a follows (b gives one back to a)
                    looked = 0
                    done = False
                    for q in sorted(led_by.get((b, a), ()), key=lambda x: (obj.weight_of(x), x)):
                        if q == p or not obj.pairs(p, q):
                            continue
                        looked += 1
                        if looked > 64:
                            break
                        if try_swaps(((p, i), (q, reps[q].index(a)))):
                            made += 2
                            done = True
                            break
                    if done:
                        break
                else:
                    if obj.slot == "topic" and self._chain(p, obj, led_by, try_swaps):
                        made += 2
            if made == before:
                break
        return made

    def _chain(self, p: int, obj: _Counts, led_by: _LedBy, try_swaps) -> bool:
        """Topic leaders: p's leader a hands its leadership to a follower x, and x hands the
        leadership of another partition of the topic to one of that partition's followers c,
        where the topic has fewer leaders: x keeps its count, a gives one to c. (With racks of two
        brokers, the broker short of the topic's leaders is often in no partition that a leads.)"""
        reps, allowed = self.pl.reps, self.pl.allowed_set
        r = reps[p]
        a, t = r[0], obj.topic[p]
        for i in range(1, len(r)):
            x = r[i]
            if x not in allowed:
                continue
            for q in sorted(led_by.tlead.get((t, x), ())):
                if q == p:
                    continue
                rq = reps[q]
                for j in range(1, len(rq)):
                    c = rq[j]
                    if c == a or c not in allowed or not obj.worth(p, a, c):
                        continue
                    chain = ((p, i), (q, j))
                    if try_swaps(chain) or self._chain_back(a, c, chain, led_by, try_swaps):
                        return True
        return False

    def _chain_back(self, a: int, c: int, chain, led_by: _LedBy, try_swaps) -> bool:
        """Where the chain a -> x -> c would take a's leader count out of its band (or c's), the
        same chain back, c -> y -> a, through partitions of any topic, in one step with it: every
        broker keeps its leader count."""
        reps, allowed = self.pl.reps, self.pl.allowed_set
        used = {q for q, _i in chain}
        looked = 0
        for q1 in sorted(led_by.lead.get(c, ())):
            if q1 in used:
                continue
            r1 = reps[q1]
            for k in range(1, len(r1)):
                y = r1[k]
                if y == a or y not in allowed:
                    continue
                for q2 in sorted(led_by.get((y, a), ())):
                    if q2 in used or q2 == q1:
                        continue
                    looked += 1
                    if looked > 64:
                        return False
                    if try_swaps((*chain, (q1, k), (q2, reps[q2].index(a)))):
                        return True
        return False


class _LedBy(dict):
    """(leader, follower) -> the partitions that broker leads with that one among its followers:
    where a leader swap is paired with the opposite one, the pair is looked up, not searched."""

    def __init__(self, reps, scope: list[int], topic: Sequence[str]):
        super().__init__()
        self.topic = topic
        self.tlead: dict[tuple[str, int], set[int]] = {}  # (topic, leader) -> its partitions
        self.lead: dict[int, set[int]] = {}  # leader -> its partitions
        for p in scope:
            self.add(p, reps[p])

    def add(self, p: int, r: Sequence[int]) -> None:
        a = r[0]
        for f in r[1:]:
            self.setdefault((a, f), set()).add(p)
        self.tlead.setdefault((self.topic[p], a), set()).add(p)
        self.lead.setdefault(a, set()).add(p)

    def drop(self, p: int, r: Sequence[int]) -> None:
        a = r[0]
        for f in r[1:]:
            s = self.get((a, f))
            if s is not None:
                s.discard(p)
        for s in (self.tlead.get((self.topic[p], a)), self.lead.get(a)):
            if s is not None:
                s.discard(p)


class _Counts:
    """A per-broker (or per topic and broker) leadership count or weight and its band:
    ``slot`` 0 / 1 (preferred leaders, first followers), ``"lbi"`` (leaders' bytes-in),
    ``"topic"`` (each topic's preferred leaders)."""

    def __init__(self, slot, count: Counter, band, *, weight=None, topic=None, bands=None):
        self.slot, self.count, self.band = slot, count, band
        self.weight, self.topic, self.bands = weight, topic, bands
        self._fixed: list[int] | None = None

    def _key(self, p: int, b: int):
        return (self.topic[p], b) if self.slot == "topic" else b

    def _band(self, key):
        return self.bands[key[0]] if self.slot == "topic" else self.band

    def dist(self, key, delta: float = 0) -> float:
        lo, hi = self._band(key)
        c = self.count[key] + delta
        return max(0.0, c - hi) + max(0.0, lo - c)

    def deltas(self, swaps, reps) -> dict:
        d: dict = defaultdict(float)
        for p, i in swaps:
            a, b = reps[p][0], reps[p][i]
            if self.slot == 1:
                if i == 1:
                    d[b] -= 1
                    d[a] += 1
                continue
            w = self.weight[p] if self.slot == "lbi" else 1
            d[self._key(p, a)] -= w
            d[self._key(p, b)] += w
        return d

    def gain(self, swaps, reps) -> float:
        return sum(self.dist(k) - self.dist(k, x) for k, x in self.deltas(swaps, reps).items())

    def keeps(self, swaps, reps) -> bool:
        return all(self.dist(k, x) <= self.dist(k) + _EPS for k, x in self.deltas(swaps, reps).items())

    def apply(self, swaps, reps) -> None:
        for k, x in self.deltas(swaps, reps).items():
            self.count[k] += x

    # -- candidate order for a pass --------------------------------------------------------------
    def candidates(self, scope: list[int], reps) -> Iterator[int]:
        """A round's partitions in the order its steps are tried, lazily (leaders' bytes-in: the
        busiest leaders as of the round's start first, each one's heaviest first; only a partition
        led by one over the band steps, so the rest is sorted only if one of them then is)."""
        if self.slot == "topic":  # (an order that does not change: sorted once)
            self._fixed = self._fixed or sorted(scope, key=lambda p: (self.topic[p], p))
            yield from self._fixed
            return
        count, hi, lead = self.count.copy(), self.band[1] + _EPS, [r[0] if r else None for r in reps]
        key = lambda p: (-count[lead[p]], -self.weight[p], p)  # noqa: E731
        yield from sorted((p for p in scope if count[lead[p]] > hi), key=key)
        over = {b for b, c in self.count.items() if c > hi}
        rest = [p for p in scope if count[lead[p]] <= hi] if over else []
        if any(reps[p][0] in over for p in rest):
            yield from sorted(rest, key=key)

    def level(self, p: int, b: int) -> float:
        return self.count[self._key(p, b)]

    def over(self, p: int, a: int) -> bool:
        """May p's leader ``a`` hand its leadership on? Above the band (topic leaders: above the
        floor, and with two or more of the topic's leaders, which :meth:`worth` asks of every
        step)."""
        key = self._key(p, a)
        lo, hi = self._band(key)
        if self.slot == "topic":
            c = self.count[key]
            return c > lo and c >= 2
        return self.count[key] > hi + _EPS

    def worth(self, p: int, a: int, b: int) -> bool:
        gap = self.count[self._key(p, a)] - self.count[self._key(p, b)]
        return gap >= 2 if self.slot == "topic" else gap > _EPS

    def weight_of(self, q: int) -> float:
        return self.weight[q] if self.slot == "lbi" else 0.0

    def pairs(self, p: int, q: int) -> bool:
        if self.slot == "topic":
            return self.topic[q] != self.topic[p]
        return self.weight[q] < self.weight[p]
