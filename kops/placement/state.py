"""The placement state of a plan in progress: the assignment being planned and everything kept
in step with it, and the one primitive that changes it (:meth:`PlacementState.move`).

:class:`PlacementState` holds the replica lists now (``reps``), the brokers replicas may live on
(``allowed``), the partitions a bounded plan left alone and the goals following the plan; its
collaborators, one role each (all integers, lists and insertion-ordered dicts: no scan of
partitions x brokers):

* :class:`Partitions` (``parts``): the partitions in scope as the plan found them -- names, lists
  before (``orig``), target RFs, sizes, bytes-in rates -- and what a list costs against them;
* :class:`Racks` (``racks``): the rack tree of the allowed brokers, the memoised rack-safety check
  (:class:`~kops.placement.rackcheck.RackSafety`) and each broker's rack (``leaf``);
* :class:`BrokerLoads` (``loads``): per broker, the load phase 2 balances (replicas, bytes or
  bytes-in, chosen by the first balance goal with data, :meth:`BrokerLoads.balance_by`), its heap
  key (the load per unit of capacity where capacities differ) and its place in the broker heaps
  (:class:`~kops.placement.heaps.BrokerHeaps`, while they follow moves);
* :class:`BrokerIndex` (``index``): per broker, the partitions it holds (``on``), those it is the
  preferred leader of (``leads``; ``pinned``: those of RF 1) and a generation counter bumped when
  it gains a partition (caches keyed on it go stale);
* :class:`Limits` (``limits``): the hard limits every move keeps (disk at the peak of the move,
  network-in), and :class:`Budget` (``budget``): the move budget.

:meth:`PlacementState.move` is the only way an assignment changes: it keeps every one of these
in step. Goals (:mod:`kops.placement.goals`) read the state and propose moves; the optimizer
(:mod:`kops.placement.optimizer`) decides which are made. Pure.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from itertools import chain
from typing import Any

from kops.model import Topology
from kops.placement.capacity import disk_capacity, disk_used, shared_disks
from kops.placement.heaps import BrokerHeaps
from kops.placement.rackcheck import RackSafety
from kops.placement.racks import RackTree
from kops.placement.scope import Goal

__all__ = ["BrokerIndex", "BrokerLoads", "Budget", "Limits", "Partitions", "PlacementState", "Racks", "swap_load"]


def swap_load(load: dict[int, Any], w: Sequence[Any], p: int, q: int, src: int, dst: int) -> None:
    """A per-broker ``load`` summed over replicas by weight ``w``, after p's replica went src -> dst
    and q's dst -> src: the two moves' steps in their order (src less p's weight, then plus q's;
    dst plus p's, then less q's), so that float loads come out as moved one at a time."""
    wp, wq = w[p], w[q]
    if src in load:
        load[src] = load[src] - wp + wq
    if dst in load:
        load[dst] = load[dst] + wp - wq


class Budget:
    """The move budget of a bounded plan (``--max-moves``, ``--max-bytes``), counted against the
    current assignment."""

    def __init__(self, max_moves: int | None, max_bytes: int | None):
        self.max_moves = max_moves
        self.max_bytes = max_bytes
        self.moves = 0
        self.bytes = 0
        self.hit = False  # something was left out for lack of budget
        self.forced = False

    @property
    def bounded(self) -> bool:
        return self.max_moves is not None or self.max_bytes is not None

    def fits(self, moves: int, nbytes: int) -> bool:
        if self.max_moves is not None and self.moves + moves > self.max_moves:
            return False
        if self.max_bytes is not None and self.bytes + nbytes > self.max_bytes:
            return False
        return True

    def may_force(self) -> bool:
        """Nothing spent yet and a non-zero budget: take one partition even over budget, so a
        partition that needs more moves than the budget still makes progress (0 = no data)."""
        if self.forced or self.moves or self.bytes:
            return False
        return self.max_moves != 0 and self.max_bytes != 0

    def spend(self, moves: int, nbytes: int) -> None:
        self.moves += moves
        self.bytes += nbytes


class Limits:
    """The hard limits a placement is checked against: a broker's disk (``threshold`` of its
    capacity, at the peak of the move: what it holds now plus every replica the plan adds to it
    so far) where its capacity and every partition's size are known, and its network-in (a share
    of its NW_IN capacity) where that and every partition's bytes-in rate are known."""

    def __init__(self, parts: Partitions, reps: list[list[int]]):
        self._orig, self._reps, self._size, self._rate = parts.orig, reps, parts.size, parts.rate
        self.disk_threshold = 0.80
        #: the disk limit (bytes) of each broker that has one, and its use at the peak of the plan
        self.disk_limit: dict[int, float] = {}
        self.disk_peak: dict[int, float] = {}
        #: the network-in limit (bytes/s) of each broker that has one, and its network-in now
        self.nw_limit: dict[int, float] = {}
        self.nw_in: dict[int, float] = {}
        #: cordoned brokers: no new replica goes to one (a partition may only keep or get back a
        #: replica it held when the plan began)
        self.closed: frozenset[int] = frozenset()

    def close(self, brokers: Sequence[int]) -> None:
        """Cordon ``brokers``: they keep their replicas and get no new one."""
        self.closed = frozenset(brokers)

    def shut(self, p: int) -> set[int]:
        """The cordoned brokers partition ``p`` may not get a replica on (it did not hold one)."""
        return set(self.closed).difference(self._orig[p]) if self.closed else set()

    def limit_disks(self, st: PlacementState, threshold: float) -> None:
        """The hard disk limit: ``threshold`` of each allowed broker's disk, where its capacity
        (``Broker.capacity``, else its log dirs' volumes) and every partition's size are known.
        A broker's use now: its volumes' total minus usable bytes where the log dirs say so
        (everything on them), else the sizes of the replicas it holds -- of every partition,
        those out of the plan's scope too."""
        self.disk_threshold = threshold
        parts = st.parts
        if not parts.sizes_known:
            return
        held: dict[int, int] = defaultdict(int)
        for part in st.topo.partitions():
            for b in part.replicas:
                held[b] += part.size_bytes or 0
        shared = shared_disks(st.topo)
        for b in st.allowed:
            cap = disk_capacity(st.topo.broker(b), shared)
            if cap:
                self.disk_limit[b] = threshold * cap
                self.disk_peak[b] = disk_used(st.topo.broker(b), held[b], shared)

    def limit_network(self, st: PlacementState, threshold: float) -> None:
        """The hard network-in limit: ``threshold`` of each allowed broker's NW_IN capacity where
        it and every partition's bytes-in rate are known (every replica takes its partition's
        bytes-in: the leader from producers, a follower by fetching), of every partition, those
        out of the plan's scope too."""
        parts = st.parts
        if not parts.rates_known:
            return
        for b in st.allowed:
            c = st.topo.broker(b).capacity
            if c is not None and c.nw_in_bytes_per_s:
                self.nw_limit[b] = threshold * c.nw_in_bytes_per_s
                self.nw_in[b] = 0.0
        for part in st.topo.partitions():
            for b in part.replicas:
                if b in self.nw_in:
                    self.nw_in[b] += part.bytes_in_per_s or 0.0

    @property
    def limited(self) -> bool:
        return bool(self.disk_limit or self.nw_limit or self.closed)

    def fits(self, b: int, p: int) -> bool:
        """May partition ``p`` get a new replica on broker ``b``: not cordoned (or held before the
        plan), within the disk limit (at the peak of the move) and the network-in limit?"""
        if b in self.closed and b not in self._orig[p]:
            return False
        limit = self.disk_limit.get(b)
        if limit is not None and b not in self._orig[p] and self.disk_peak[b] + self._size[p] > limit:
            return False
        limit = self.nw_limit.get(b)
        return limit is None or b in self._reps[p] or self.nw_in[b] + self._rate[p] <= limit

    def moved(self, p: int, old: Sequence[int], new: Sequence[int]) -> None:
        """Partition ``p``'s list went from ``old`` to ``new``: network-in and disk peaks follow."""
        if not (self.nw_in or self.disk_limit):
            return
        if self.nw_in:
            rate = self._rate[p]
            for b in old:
                if b in self.nw_in and b not in new:
                    self.nw_in[b] -= rate
            for b in new:
                if b in self.nw_in and b not in old:
                    self.nw_in[b] += rate
        if self.disk_limit:
            orig, size = self._orig[p], self._size[p]
            for b in new:
                if b in self.disk_peak and b not in orig and b not in old:
                    self.disk_peak[b] += size
            for b in old:
                if b in self.disk_peak and b not in orig and b not in new:
                    self.disk_peak[b] -= size


class Partitions:
    """The partitions in scope of a plan as the plan found them, fixed while it runs: their
    :class:`~kops.model.Partition` records (``scope``), names (``tps``), replica lists before
    (``orig``), target RFs (``rf``), sizes (``size``, 0 where unknown) and bytes-in rates
    (``rate``), and whether every size and every rate is known."""

    def __init__(self, res: Any):
        self.scope = res.scope
        self.tps = [p.tp for p in res.scope]
        self.orig = [p.replicas for p in res.scope]
        self.rf: list[int] = res.rf
        sizes = [p.size_bytes for p in res.scope]
        self.sizes_known = bool(sizes) and all(s is not None for s in sizes)
        self.size = [int(s) if s is not None else 0 for s in sizes]
        rates = [p.bytes_in_per_s for p in res.scope]
        self.rates_known = bool(rates) and all(r is not None for r in rates)
        self.rate = [float(r or 0.0) for r in rates]

    def cost(self, p: int, new: Sequence[int]) -> tuple[int, int]:
        """Replica copies (and bytes) ``new`` needs against the current assignment."""
        o = self.orig[p]
        added = [b for b in new if b not in o]
        return len(added), len(added) * self.size[p]


class Racks:
    """The racks of the allowed brokers: the tree, the memoised rack-safety check
    (:class:`~kops.placement.rackcheck.RackSafety`), each allowed broker's rack (``leaf``) and
    each rack's brokers (``leaf_members``)."""

    def __init__(self, topo: Topology, allowed: Sequence[int]):
        self._topo = topo
        rack_of = {b: topo.rack_of(b) for b in allowed}
        self.tree = RackTree.build(rack_of)
        self.safety = RackSafety(self.tree)
        self.leaf = self.safety.leaf
        self.leaf_members: dict[int, list[int]] = defaultdict(list)
        for b in allowed:
            self.leaf_members[self.leaf[b]].append(b)
        # leaf of every known broker in the allowed tree's terms (None: not an allowed rack)
        self._leaf_by_rack: dict[str | None, int] = {}
        for b in allowed:
            self._leaf_by_rack.setdefault(rack_of[b], self.leaf[b])

    def topo_leaf(self, b: int) -> int | None:
        """Leaf index (in the allowed tree) of broker ``b``'s rack, also for removed brokers."""
        if b in self.leaf:
            return self.leaf[b]
        r = self._topo.rack_of(b)
        return self._leaf_by_rack.get(r) if r is not None else None


class BrokerLoads:
    """The load phase 2 balances, per allowed broker: replicas, bytes or bytes-in (chosen by the
    first balance goal with data, :meth:`balance_by`), each partition's integer weight (``w``),
    each broker's share where capacities differ (``capw``), its heap key (``key``: the load per
    unit of its share) and its place in the broker heaps (:class:`~kops.placement.heaps.BrokerHeaps`).
    Kept current by :meth:`PlacementState.move`; the keys and heaps only while phase 2 runs."""

    def __init__(self, allowed: list[int], n_partitions: int):
        self._allowed = allowed
        # replica counts until balance_by says otherwise
        self.primary = "count"
        self.bytes_mode = False
        self.weighted = False
        self.w: list[int] = [1] * n_partitions
        self.capw: dict[int, int] | None = None
        self.load: dict[int, int] = {b: 0 for b in allowed}
        self.key: dict[int, float] = self.load
        self.heaps = BrokerHeaps(self.key, allowed)
        #: the keys and heaps follow moves until phase 2 ends
        self.balancing = True

    def balance_by(self, primary: str, w: list[int], capw: dict[int, int] | None) -> None:
        """What phase 2 balances: ``primary`` (a goal's name, or "count"), each partition's
        integer weight, and each broker's share of the total where capacities differ (None:
        equal shares). Set before the loads are filled (:func:`kops.placement.repair.prepare`)."""
        self.primary = primary
        self.bytes_mode = primary == "disk-usage"
        self.weighted = primary in ("disk-usage", "nw-in-usage")
        self.w = w
        self.capw = capw
        if capw is not None:
            self.key = {b: 0.0 for b in self._allowed}
            self.heaps = BrokerHeaps(self.key, self._allowed)

    def end_balance(self) -> None:
        """Phase 2 is over: the keys and heaps are not read again (see :meth:`PlacementState.end_balance`)."""
        self.balancing = False
        self.heaps.let_go()

    def rekey(self, b: int) -> None:
        if self.capw is not None:
            self.key[b] = self.load[b] / self.capw[b]

    def excess(self, b: int, total: int, capsum: int) -> int:
        """How far ``b`` is above its target share of ``total`` (scaled by ``capsum``: integers;
        negative below it). Equal shares: ``n * load - total``."""
        return self.load[b] * capsum - total * (1 if self.capw is None else self.capw[b])

    def moved(self, p: int, gone: Sequence[int], came: Sequence[int]) -> None:
        """Partition ``p`` left the brokers ``gone`` and came to ``came``: loads (and, while phase 2
        runs, keys and heaps) follow."""
        w = self.w[p]
        load = self.load
        for b in gone:
            if b in load:
                load[b] -= w
        for b in came:
            if b in load:
                load[b] += w
        if self.balancing:
            if self.capw is not None:
                for b in chain(gone, came):
                    if b in load:
                        self.rekey(b)
            if self.heaps.live:
                for b in chain(gone, came):
                    if b in load:
                        self.heaps.push(b)

    def swapped(self, p: int, q: int, src: int, dst: int) -> None:
        """p's replica went src -> dst and q's dst -> src (:meth:`PlacementState.swap`): :meth:`moved`
        of each in turn, in one call (each load takes the same two steps in the same order)."""
        if self.balancing:
            self.moved(p, (src,), (dst,))
            self.moved(q, (dst,), (src,))
            return
        swap_load(self.load, self.w, p, q, src, dst)


class BrokerIndex:
    """Per allowed broker, what it holds of the assignment: the partitions (``on``), the partitions
    it is the preferred leader of (``leads``, replica index 0; ``pinned``: those of RF 1, which no
    reordering can move) and a generation counter bumped when it gains a partition or one of its
    partitions' lists changes (caches keyed on it go stale). Kept current by
    :meth:`PlacementState.move`; leaderships and generations only while phase 2 runs."""

    def __init__(self, allowed: list[int], reps: list[list[int]]):
        self.on: dict[int, dict[int, None]] = {b: {} for b in allowed}
        self.gen: dict[int, int] = {b: 0 for b in allowed}
        self.leads: Counter[int] = Counter(r[0] for r in reps if r)
        self.pinned: Counter[int] = Counter(r[0] for r in reps if len(r) == 1)
        #: leaderships and generations follow moves until phase 2 ends
        self.balancing = True

    def end_balance(self) -> None:
        """Phase 2 is over: leaderships and generations are not read again."""
        self.balancing = False

    def moved(self, p: int, old: Sequence[int], new: Sequence[int], gone: Sequence[int], came: Sequence[int]) -> None:
        """Partition ``p``'s list went from ``old`` to ``new``, leaving ``gone`` and coming to ``came``."""
        on = self.on
        for b in gone:
            if b in on:
                del on[b][p]
        for b in came:
            if b in on:
                on[b][p] = None
        if self.balancing:
            leads, gen = self.leads, self.gen
            if old:
                leads[old[0]] -= 1
                if len(old) == 1:
                    self.pinned[old[0]] -= 1
            if new:
                leads[new[0]] += 1
                if len(new) == 1:
                    self.pinned[new[0]] += 1
            for b in new:  # (gained p, or p's list changed under it: what it cached of its partitions)
                if b in gen:
                    gen[b] += 1


class PlacementState:
    """The assignment of the partitions in scope of a plan (``reps``), its collaborators kept in
    step with it, and the one primitive that changes it (see the module doc). ``res``: the
    goal's resolution (:func:`kops.placement.scope.resolve`)."""

    def __init__(self, topo: Topology, goal: Goal, res: Any, max_moves: int | None, max_bytes: int | None,
                 band_share: float):
        self.topo = topo
        self.goal = goal
        self.res = res
        self.allowed: list[int] = res.allowed
        self.allowed_set = set(res.allowed)
        self.parts = Partitions(res)
        self.reps = [list(p.replicas) for p in res.scope]
        self.racks = Racks(topo, self.allowed)
        self.loads = BrokerLoads(self.allowed, len(self.reps))
        self.index = BrokerIndex(self.allowed, self.reps)
        self.budget = Budget(max_moves, max_bytes)
        self.limits = Limits(self.parts, self.reps)
        #: partitions a bounded plan left as they are (their repair did not fit the budget)
        self.unrepaired: set[int] = set()
        #: the balance goals' band: a broker within this share of the mean is balanced
        self.band_share = band_share
        #: replica lists whose set of brokers changed so far (moves; reorders not counted)
        self.moved = 0
        #: what follows every move (``moved(p, gone, came)``) and swap (``swapped(p, q, src,
        #: dst)``, :meth:`swap`): the goals tracking the plan
        self.watchers: list[Any] = []

    def may_go(self, p: int, src: int, dst: int) -> bool:
        """May p's replica on src go to dst as far as the hard goals go: dst not holding p, p not
        left by a bounded plan, within dst's limits, rack-safe? (What :meth:`Optimizer.try_moves
        <kops.placement.optimizer.Optimizer.try_moves>` checks of each move unless told it is ``hard``.)"""
        r = self.reps[p]
        if dst in r or p in self.unrepaired or (self.limits.limited and not self.limits.fits(dst, p)):
            return False
        return self.racks.safety.replaced(r, src, dst)

    def end_balance(self) -> None:
        """Phase 2 is over: nothing reads its bookkeeping (generations, leaderships, the broker
        heaps) again, so moves stop keeping it (the goal passes make hundreds of thousands)."""
        self.loads.end_balance()
        self.index.end_balance()

    def replace(self, p: int, src: int, dst: int) -> None:
        """Partition ``p``'s replica on ``src`` goes to ``dst`` (not holding it), in the same slot:
        :meth:`move`, without comparing the lists."""
        self.move(p, [dst if b == src else b for b in self.reps[p]], [src], [dst])

    def move(self, p: int, new: list[int], gone: list[int] | None = None, came: list[int] | None = None) -> None:
        """Partition ``p``'s replica list becomes ``new`` (a move, a swap's half, a reorder): the
        limits, the loads, the brokers' index follow, and every watcher (the goals tracking the
        plan) sees the move. ``gone`` / ``came``: the brokers p leaves and comes to, where the
        caller knows them."""
        old = self.reps[p]
        if gone is None or came is None:
            gone = [b for b in old if b not in new]
            came = [b for b in new if b not in old]
        if gone or came:
            self.limits.moved(p, old, new)
            self.loads.moved(p, gone, came)
        self.index.moved(p, old, new, gone, came)
        if gone or came:
            self.moved += 1
            for watcher in self.watchers:
                watcher.moved(p, gone, came)
        self.reps[p] = new

    def swap(self, p: int, q: int, src: int, dst: int) -> None:
        """Partition ``p``'s replica on ``src`` and ``q``'s on ``dst`` trade brokers, each in its
        slot (neither holding the other broker): :meth:`replace` of p then of q, as one step --
        the limits and the brokers' index follow each half in that order, the loads and every
        watcher the two at once (``swapped(p, q, src, dst)``: the same result as ``moved`` of
        each half in turn)."""
        reps = self.reps
        old_p, old_q = reps[p], reps[q]
        new_p = [dst if b == src else b for b in old_p]
        new_q = [src if b == dst else b for b in old_q]
        at_src, at_dst = [src], [dst]
        self.limits.moved(p, old_p, new_p)
        self.limits.moved(q, old_q, new_q)
        self.loads.swapped(p, q, src, dst)
        self.index.moved(p, old_p, new_p, at_src, at_dst)
        self.index.moved(q, old_q, new_q, at_dst, at_src)
        self.moved += 2
        for watcher in self.watchers:
            watcher.swapped(p, q, src, dst)
        reps[p], reps[q] = new_p, new_q
