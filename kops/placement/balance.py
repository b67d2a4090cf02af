"""Phase 2: balance the state's load (replica counts, bytes or bytes-in: the first balance goal
with data, :meth:`kops.placement.state.BrokerLoads.balance_by`) with as few moves as possible.

Targets are ``floor(T/n)`` and ``ceil(T/n)`` of the total over the allowed brokers (weighted: each
broker's share of it). Repeatedly the most loaded broker gives one replica to the least-loaded
broker that can take one of its partitions rack-safely and within the limits -- only when the move
is *useful* (it brings both toward the target; by weight, it overshoots neither), so in an
unconstrained cluster the number of moves equals the lower bound; where rack rules hold some
brokers above the band (so that the others cannot all reach it), also to a broker below the band
from one at least two above it, evening those below it among themselves. Then the same inside every rack
(moves inside a rack never break rack-safety). For ``add-brokers`` the destinations are the new
brokers only. Negative results per (broker, destination rack) are cached and invalidated by the
broker's generation counter. Pure.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Iterable
from itertools import chain
from typing import Protocol

from kops.placement.state import PlacementState

__all__ = ["Balancer"]


class Lookahead(Protocol):
    """What the later goals prefer among the replicas phase 2 may move (by count: a move of any
    one of them is as good for the balance)."""

    def pair(self, src: int, dst: int) -> Callable[[int], tuple[float, ...]]:
        """The score of moving a replica of partition ``p`` from src to dst: higher is better for
        the later goals (a function of p, for many candidates of one pair of brokers)."""

    def best(self) -> tuple[float, ...]:
        """A score nothing beats: the search stops at it."""

    def placing(self, p: int, b: int) -> tuple[float, ...]:
        """A new replica of ``p`` on ``b``: lower is better for the later goals."""

    def first(self, src: int, dst: int) -> Iterable[int]:
        """src's replicas the later goals would move to dst first (looked at before the others)."""


class Balancer:
    """Phase 2 over a repaired state (see the module doc). ``prefer``: by count, among the
    replicas of a broker that may move, the later goals' choice (the first follower without it)."""

    #: replicas looked at for the later goals' choice, per move (over all its destinations)
    LOOKAHEAD = 48
    #: useful destinations looked at for the later goals' choice, per move
    DESTINATIONS = 4

    def __init__(self, st: PlacementState, prefer: Lookahead | None = None):
        self.st = st
        self.prefer = prefer
        #: (broker, destination rack) -> the broker's generation when none of its partitions could go there
        self.neg: dict[tuple[int, int], int] = {}
        self._budget = self.LOOKAHEAD  # (replicas the lookahead may still look at for this move)
        self._score: tuple[float, ...] | None = None
        #: broker -> (its generation, its partitions' negated weights heaviest first, the partitions)
        self._sorted: dict[int, tuple[int, list[int], list[int]]] = {}
        self._scanned = False

    def balance(self) -> None:
        st = self.st
        allowed = st.allowed
        n = len(allowed)
        if n < 2 or not st.reps:
            return
        # 1. over all allowed brokers; 2. inside every rack (moves inside a rack never break
        # rack-safety; this evens brokers of a rack whose load the rack rule pins, e.g. RF = racks:
        # by bytes too, where the global pass can stop a partition or two from the mean with the
        # only useful moves between racks, which the rack rule forbids)
        groups = [allowed, *(m for _, m in sorted(st.racks.leaf_members.items()) if len(m) > 1)]
        for members in groups:
            self._balance_group(members)
            if st.budget.hit:
                return

    def _balance_group(self, members: list[int]) -> None:
        st = self.st
        loads = st.loads
        n = len(members) if loads.capw is None else sum(loads.capw[b] for b in members)  # the shares' sum
        total = sum(loads.load[b] for b in members)
        floor_, ceil_ = total // n, -(-total // n)
        while True:
            frozen: set[int] = set()
            made = self._balance_pass(members, n, total, floor_, ceil_, frozen)
            # brokers set aside in this pass may have become movable through later moves
            if not made or not frozen or st.budget.hit:
                return

    def _balance_pass(self, members: list[int], n: int, total: int, floor_: int, ceil_: int, frozen: set[int]) -> int:
        """One pass of moves from the most to the least loaded brokers of ``members`` (``n``: the
        sum of their shares, see :meth:`~kops.placement.state.BrokerLoads.excess`; by count the
        number of brokers)."""
        st = self.st
        loads, index = st.loads, st.index
        bytes_mode = loads.weighted
        prefer = None if bytes_mode else self.prefer
        top = prefer.best() if prefer is not None else ()
        dest = st.res.dest_only
        closed = st.limits.closed
        load = loads.load
        key = loads.key
        excess = loads.excess
        heaps = loads.heaps
        heaps.rebuild(members)
        maxheap = heaps.maxheap
        made = 0

        def useful(ls: int, ld: int) -> bool:  # (by count; weighted: excess() of src > 0 > of dst)
            # into the band [floor, ceil]; or, where rack rules keep some brokers out of reach
            # (held above the band, so that the others cannot all reach it), any move from above
            # the band, or to a broker below it, that narrows the gap by two (the heap offers the
            # least loaded destinations first, so an unconstrained cluster never gets here)
            return (ls > ceil_ and ld < ceil_) or (ls > floor_ and ld < floor_) or \
                ((ls > ceil_ or ld < floor_) and ls - ld >= 2)

        while maxheap:
            negl, src = heapq.heappop(maxheap)
            if -negl != key[src] or src in frozen:
                continue
            ls = load[src]
            exc_src = excess(src, total, n) if bytes_mode else 0
            if bytes_mode and exc_src <= 0:
                break  # nobody above the target: balanced
            # by count: nobody above the band and nobody two below src (below the band only where
            # rack rules hold other brokers above it: even those that can move among themselves)
            if not bytes_mode and ls <= floor_ and ls - min(load[b] for b in members) < 2:
                break
            scans = [0]
            choice: list[tuple[int, int]] = []
            # an RF-1 partition hands its leadership to where it goes and no reordering can give
            # it back: among destinations as loaded as the first that takes one, the broker with
            # the fewest such leaderships (then the fewest leaderships: the leader phase can hand
            # the others on) gets it, else leaders pile up on one broker
            rf1: list[tuple[tuple[int, int, int], int, int, float]] = []  # (order, p, dst, key)
            min_w = self._by_weight(src)[0][-1] * -1 if bytes_mode and index.on[src] else 0
            # by count with a lookahead: of the first few useful destinations, the move the later
            # goals score best (every useful move is one step of balance: the count is the same)
            picked: list[tuple[tuple[float, ...], int, int]] = []  # (score, p, dst)

            def accept(dst: int) -> int:
                if dst == src:
                    return 0
                ld = load[dst]
                if bytes_mode:
                    exc_dst = excess(dst, total, n)
                    if exc_dst >= 0 or (rf1 and key[dst] > rf1[0][3]):
                        return -1
                    # by bytes, the bound min(src above, dst below its target) only shrinks as
                    # destinations get heavier: once src's smallest partition exceeds it, stop
                    bound = min(exc_src, -exc_dst)
                    if n * min_w > bound:
                        return -1
                else:
                    bound = 0
                    if not useful(ls, ld) or (rf1 and ld > rf1[0][3]):
                        return -1
                if (dest is not None and dst not in dest) or dst in closed:
                    return 0  # (a cordoned broker takes no new replica: not worth a scan)
                p = self._find_movable(src, dst, bound, n)
                if p is None:
                    if self._scanned:
                        scans[0] += 1
                        if scans[0] > 256:
                            return -1
                    return 0
                if len(st.reps[p]) == 1:
                    k = (index.pinned[dst], index.leads[dst], dst)
                    if not rf1 or k < rf1[0][0]:
                        rf1[:] = [(k, p, dst, key[dst])]
                    if k[0] or k[1]:
                        return 0  # look at the next destination as loaded
                elif prefer is not None:
                    score = self._score
                    if not picked or score > picked[0][0]:
                        picked[:] = [(score, p, dst)]
                    if score < top and len(seen) < self.DESTINATIONS and self._budget > 0:
                        seen.append(dst)
                        return 0
                    choice.append(picked[0][1:])
                    return 1
                choice.append((p, dst))
                return 1

            seen: list[int] = []
            self._budget = self.LOOKAHEAD
            found = heaps.ascending(accept)
            if found is None and picked:
                found = picked[0][2]
                choice.append(picked[0][1:])
            if found is None and rf1:
                found = rf1[0][2]
                choice.append((rf1[0][1], found))
            if found is None:
                # no direct move: src -> mid -> dst through a broker mid that stays as loaded
                if not bytes_mode and dest is None and self._chain(src, members, useful, ls):
                    made += 2
                    heapq.heappush(maxheap, (-load[src], src))
                    continue
                frozen.add(src)
                continue
            p, dst = choice[0]
            r = st.reps[p]
            new = [dst if b == src else b for b in r]
            mv, by = st.parts.cost(p, new)
            omv, oby = st.parts.cost(p, r)
            dmv, dby = mv - omv, by - oby
            if not st.budget.fits(dmv, dby):
                st.budget.hit = True
                # a smaller partition might fit the byte budget; stop here to keep plans simple
                break
            st.budget.spend(dmv, dby)
            st.move(p, new)
            made += 1
            heapq.heappush(maxheap, (-load[src], src))
            heapq.heappush(maxheap, (-load[dst], dst))
        return made

    def _chain(self, src: int, members: list[int], useful, ls: int) -> bool:
        """Two moves for one step of balance (by count), when no replica of ``src`` can go to
        an under-loaded broker directly (rack rules pin it): one of src's replicas to a broker
        ``mid``, and one of mid's (another partition) on to the under-loaded ``dst``; mid's
        load is unchanged. Without it the plan could stop short of balance (spread 2 where 0
        was reachable). Taken over a move budget only as the one forced step of a bounded run."""
        st = self.st
        load = st.loads.load
        on = st.index.on
        reps = st.reps
        safe = st.racks.safety.safe_distinct
        dsts = sorted((b for b in members if b != src and useful(ls, load[b])), key=lambda b: (load[b], b))
        mids = sorted((b for b in members if b != src and b not in dsts), key=lambda b: (load[b], b))
        if not dsts or not mids:
            return False
        budget = 4096  # partitions looked at: a bound for very large clusters
        for dst in dsts:
            for mid in mids:
                for q in on[mid]:
                    budget -= 1
                    if budget < 0:
                        return False
                    rq = reps[q]
                    if dst in rq or q in st.unrepaired:
                        continue
                    new_q = [dst if b == mid else b for b in rq]
                    if not safe(new_q) or not st.limits.fits(dst, q):
                        continue
                    for p in on[src]:
                        budget -= 1
                        rp = reps[p]
                        if p == q or mid in rp or p in st.unrepaired:
                            continue
                        new_p = [mid if b == src else b for b in rp]
                        if not safe(new_p) or not st.limits.fits(mid, p):
                            continue
                        cost_of = st.parts.cost
                        cost = [(a - b, c - d) for (a, c), (b, d) in
                                ((cost_of(p, new_p), cost_of(p, rp)), (cost_of(q, new_q), cost_of(q, rq)))]
                        dmv, dby = sum(c[0] for c in cost), sum(c[1] for c in cost)
                        if not st.budget.fits(dmv, dby):
                            if not (st.budget.may_force() and dmv > 0):
                                st.budget.hit = True
                                return False
                            st.budget.forced = True
                        st.budget.spend(dmv, dby)
                        st.move(p, new_p)
                        st.move(q, new_q)
                        return True
                    break  # q can go to dst but no p of src can go to mid: try another mid
        return False

    def _by_weight(self, src: int) -> tuple[list[int], list[int]]:
        """``src``'s partitions heaviest first (ties in its order), as (negated weights, partitions);
        rebuilt when src gains or changes a partition (its ``gen``), a partition it lost since is
        skipped by the caller (``p in on[src]``)."""
        index = self.st.index
        got = self._sorted.get(src)
        if got is None or got[0] != index.gen[src]:
            w = self.st.loads.w
            ps = sorted(index.on[src], key=lambda p: -w[p])  # stable: ties keep src's order
            got = (index.gen[src], [-w[p] for p in ps], ps)
            self._sorted[src] = got
        return got[1], got[2]

    def _heaviest_movable(self, src: int, dst: int, bound_n: int, n: int, same: bool) -> tuple[int | None, bool]:
        """Weighted: the heaviest partition of ``src`` with ``n * weight <= bound_n`` that can go to
        ``dst`` (a follower before a leader of the same weight), and whether every partition
        refused was refused by rack-safety only. Walks src's partitions by weight from the bound
        down: what the full scan finds, without reading what is too heavy."""
        st = self.st
        negw, ps = self._by_weight(src)
        start = bisect.bisect_left(negw, -(bound_n // n)) if n else 0
        only_rack = start == 0
        on, reps, unrepaired, w = st.index.on[src], st.reps, st.unrepaired, st.loads.w
        fits = st.limits.fits if st.limits.limited else None
        safe = st.racks.safety.safe_distinct
        lead_pick: int | None = None
        for i in range(start, len(ps)):
            p = ps[i]
            if p not in on:
                continue
            wp = w[p]
            if wp == 0 or (lead_pick is not None and wp < w[lead_pick]):
                only_rack = False
                break
            r = reps[p]
            if dst in r or p in unrepaired or (fits is not None and not fits(dst, p)):
                only_rack = False
                continue
            leads = r[0] == src
            if leads and lead_pick is not None:
                continue
            if not same and not safe([dst if b == src else b for b in r]):
                continue
            if not leads:
                return p, False
            lead_pick = p
        return lead_pick, only_rack

    def _find_movable(self, src: int, dst: int, bound_n: int, n: int) -> int | None:
        """A partition on ``src`` whose replica can move to ``dst`` rack-safely (and, weighted,
        without overshooting either one's target: ``n * weight <= bound_n``)."""
        st = self.st
        racks = st.racks
        leaf = racks.leaf
        ldst = leaf[dst]
        same = leaf[src] == ldst
        key = (src, ldst)
        self._scanned = False
        gen = st.index.gen[src]  # (src's generation: no move is made while looking)
        if not same and self.neg.get(key) == gen:
            return None
        self._scanned = True
        if st.loads.weighted:
            best, only_rack = self._heaviest_movable(src, dst, bound_n, n, same)
            if best is None and not same and only_rack:
                self.neg[key] = gen
            return best
        if self.prefer is not None:
            return self._preferred_movable(src, dst, same, key)
        safe = racks.safety.safe_distinct
        reps = st.reps
        unrepaired = st.unrepaired
        only_rack_failures = True
        # by count: a follower first (moving a leader hands its partition to ``dst``; for RF 1,
        # where no reordering can give it back, leaders would pile up there)
        best = None
        looked = 0
        fits = st.limits.fits if st.limits.limited else None
        for p in st.index.on[src]:
            r = reps[p]
            if dst in r or p in unrepaired or (fits is not None and not fits(dst, p)):
                only_rack_failures = False
                continue
            leads = r[0] == src
            if best is not None:
                looked += 1
                if looked > 64:  # a bound: a broker that only leads (RF 1) is not scanned whole
                    return best
                if leads:
                    continue
            if not same and not safe([dst if b == src else b for b in r]):
                continue
            if not leads:
                return p
            best = p
        if best is None and not same and only_rack_failures:
            self.neg[key] = gen
        return best

    def _preferred_movable(self, src: int, dst: int, same: bool, key: tuple[int, int]) -> int | None:
        """By count, with the later goals' preference: of the replicas of ``src`` that may move to
        ``dst`` (rack-safe, within the limits), while the move's :attr:`LOOKAHEAD` lasts, the one
        they score best (then a follower before a leader: moving a leader hands its partition to
        ``dst``; an RF-1 leader last, since no reordering can give it back)."""
        st, prefer = self.st, self.prefer
        safe = st.racks.safety.replaced
        reps, unrepaired = st.reps, st.unrepaired
        fits = st.limits.fits if st.limits.limited else None
        top = prefer.best()
        score_of = prefer.pair(src, dst)
        only_rack_failures = True
        best = best_key = best_score = None
        on = st.index.on[src]
        seen: set[int] = set()
        for p in chain(prefer.first(src, dst), on):
            if p in seen or p not in on:
                continue
            seen.add(p)
            r = reps[p]
            if dst in r or p in unrepaired or (fits is not None and not fits(dst, p)):
                only_rack_failures = False
                continue
            score = score_of(p)
            k = (len(r) == 1, score, r[0] != src)  # (an RF-1 leader last; then the best; a follower first)
            self._budget -= 1
            if best is not None and self._budget < 0:
                break
            if best is not None:
                if k[0] > best_key[0] or (k[0] == best_key[0] and k[1:] <= best_key[1:]):
                    continue
            if not same and not safe(r, src, dst):
                continue
            best, best_key, best_score = p, k, score
            if len(r) > 1 and score >= top and r[0] != src:
                break
        if best is None and not same and only_rack_failures:
            self.neg[key] = st.index.gen[src]
        self._score = best_score
        return best

