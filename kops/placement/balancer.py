"""Minimal-movement, rack-safe replica planner (``kops plan rebalance | decommission | ...``).

Pure: takes a :class:`~kops.model.Topology` and a :class:`Goal`, returns a :class:`PlanResult`
(target assignment, Kafka reassignment plan of the partitions that change, report). No I/O.
See ``docs/planner.md`` for the algorithm, the guarantees and how the lower bound is computed.

Phases (each over integer lists and per-broker counters; no O(partitions x brokers) scans):

1. **repair** (mandatory): per partition in scope, drop replicas on brokers that are not allowed
   (removed, dead, outside the broker list) and duplicates, drop extra replicas when the RF goes
   down, add replicas up to the RF, and repair rack-unsafe lists. A new replica goes to the
   least-loaded allowed broker that keeps the list rack-safe (preferring the rack of the replica
   it replaces on ties), found by popping a lazy min-heap.
2. **balance**: while a broker is above the target, move one replica from the most loaded broker
   to the least-loaded broker that can take it rack-safely -- only moves that reduce the distance
   to the target (so every move counts toward the lower bound).
3. **leaders** (no data): :func:`kops.placement.leaders.balance_orders` reorders replica lists
   to balance preferred leaders, then first followers.

Bounded mode (``max_moves`` / ``max_bytes``): phases 1-2 stop spending once the budget is used;
a partition's repair is all-or-nothing, every single move keeps its list rack-safe and brings the
cluster closer to the target, so each partial plan is safe on its own and repeated runs converge.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from itertools import chain
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kops.errors import BadInput
from kops.model import ReassignmentPlan, TopicPartition, Topology
from kops.placement.leaders import balance_orders, restore_orders
from kops.placement.rackcheck import RackSafety
from kops.placement.racks import RackTree
from kops.placement.limits import LoadsAndLimits
from kops.placement.scope import GOAL_KINDS, Goal, _resolve  # noqa: F401 (GOAL_KINDS: public)

__all__ = [
    "GOAL_KINDS",
    "Goal",
    "PlanResult",
    "plan",
    "plan_rebalance",
    "plan_decommission",
    "plan_add_brokers",
    "plan_drain_rack",
    "plan_set_replication_factor",
    "plan_move_topics",
    "KAFKA_SEED",
]


#: seed of the ``random.Random`` used for "what Kafka's --generate would propose" (Kafka draws
#: its start index and shift at random; kops fixes the draws so its reports are reproducible)
KAFKA_SEED = 0


@dataclass
class PlanResult:
    goal: Goal
    #: full target assignment of the partitions in scope (tp -> replicas, preferred leader first)
    target: dict[TopicPartition, tuple[int, ...]]
    #: only the partitions whose replica list changes (set or order)
    changes: dict[TopicPartition, tuple[int, ...]]
    #: the report (JSON-ready, deterministic); see docs/planner.md
    report: dict[str, Any]
    #: True when this plan reaches the goal (False: a bounded step; run again after it)
    complete: bool = True
    before: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)

    @property
    def plan(self) -> ReassignmentPlan:
        return ReassignmentPlan.from_assignment(self.changes)

    def topology_after(self, topology: Topology) -> Topology:
        return topology.with_assignment(self.changes)


# ---------------------------------------------------------------------------------------------
# public entry points
# ---------------------------------------------------------------------------------------------
#: default hard limit of a broker's disk use a plan may reach (issue 21's disk capacity goal)
DISK_THRESHOLD = 0.80


def plan(
    topology: Topology,
    goal: Goal,
    *,
    max_moves: int | None = None,
    max_bytes: int | None = None,
    throttle: int | None = None,
    compare_kafka: bool = True,
    kafka_seed: int = KAFKA_SEED,
    balance_followers: bool = True,
    rebalance: bool = True,
    disk_threshold: float = DISK_THRESHOLD,
    goals: Sequence[str] | str | None = None,
) -> PlanResult:
    """Compute a minimal-movement, rack-safe, balanced plan for ``goal``.

    ``disk_threshold`` (a share of a broker's disk, default 80 %) is a hard limit where disk
    capacities and sizes are known: no move of the plan takes a destination past it, counting
    data in flight (a destination holds its new replicas before any source lets go of one).
    A move the goal forces (a removed broker's replicas) that fits nowhere still goes where it
    is most even, and the report's ``disk-capacity`` goal names the brokers past the limit.

    ``goals``: the goals to optimise, in priority order (``--goals``; default
    :data:`kops.placement.goals.DEFAULT_GOALS`, ``"all"`` every goal): hard goals are always
    kept; phase 2 balances the first balance goal whose data is known (disk use, network-in use,
    replica counts) and :mod:`kops.placement.refine` the later ones, each without making an
    earlier one worse. The network-in limit (80 % of NW_IN) is hard where capacities and rates
    are known.

    ``rebalance=False``: only the moves the goal forces (replicas off removed brokers, RF
    changes, rack repairs) plus leadership reordering; no balancing moves.

    Raises :class:`BadInput` when the goal is malformed or cannot be met (naming the partitions,
    brokers and racks in conflict). Deterministic: the same topology and goal give the same plan.
    """
    if max_moves is not None and max_moves < 0:
        raise BadInput(f"--max-moves must be >= 0 (got {max_moves})")
    if max_bytes is not None and max_bytes < 0:
        raise BadInput(f"--max-bytes must be >= 0 (got {max_bytes})")
    if throttle is not None and throttle <= 0:
        raise BadInput(f"--throttle must be > 0 bytes/s (got {throttle})")
    if not 0 < disk_threshold <= 1:
        raise BadInput(f"the disk threshold must be above 0 and at most 100 % (got {disk_threshold:.0%})")
    from kops.placement.goals import DEFAULT_THRESHOLD

    planner = _Planner(topology, goal, max_moves, max_bytes, balance_followers, goals)
    planner.rebalance = rebalance
    planner.limit_disks(disk_threshold)
    planner.limit_network(DEFAULT_THRESHOLD)
    return planner.run(throttle=throttle, compare_kafka=compare_kafka, kafka_seed=kafka_seed)


def plan_rebalance(topology: Topology, **kw: Any) -> PlanResult:
    return plan(topology, Goal("rebalance"), **kw)


def plan_decommission(topology: Topology, brokers: Iterable[int], **kw: Any) -> PlanResult:
    return plan(topology, Goal("decommission", brokers=tuple(brokers)), **kw)


def plan_add_brokers(topology: Topology, brokers: Iterable[int], **kw: Any) -> PlanResult:
    return plan(topology, Goal("add-brokers", brokers=tuple(brokers)), **kw)


def plan_drain_rack(topology: Topology, rack: str, **kw: Any) -> PlanResult:
    return plan(topology, Goal("drain-rack", rack=rack), **kw)


def plan_set_replication_factor(
    topology: Topology, topics: Iterable[str] | str, replication_factor: int, **kw: Any
) -> PlanResult:
    names = (topics,) if isinstance(topics, str) else tuple(topics)
    return plan(topology, Goal("set-replication-factor", topics=names, replication_factor=replication_factor), **kw)


def plan_move_topics(topology: Topology, topics: Iterable[str], brokers: Iterable[int], **kw: Any) -> PlanResult:
    return plan(topology, Goal("move-topics", topics=tuple(topics), brokers=tuple(brokers)), **kw)


# ---------------------------------------------------------------------------------------------
# the planner
# ---------------------------------------------------------------------------------------------
class _Budget:
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


class _Planner(LoadsAndLimits):
    def __init__(
        self,
        topo: Topology,
        goal: Goal,
        max_moves: int | None,
        max_bytes: int | None,
        balance_followers: bool,
        goals: Sequence[str] | None = None,
    ):
        from kops.placement.goals import select_goals

        self.topo = topo
        #: the goals in priority order (hard ones always; :func:`kops.placement.goals.select_goals`)
        self.goals = select_goals(goals)
        self.goal = goal
        res = _resolve(topo, goal)
        self.res = res
        self.followers = balance_followers
        self.allowed = res.allowed
        self.allowed_set = set(res.allowed)
        self.scope = res.scope
        self.tps = [p.tp for p in res.scope]
        self.orig = [p.replicas for p in res.scope]
        self.reps = [list(p.replicas) for p in res.scope]
        self.rf = res.rf
        sizes = [p.size_bytes for p in res.scope]
        self.sizes_known = bool(sizes) and all(s is not None for s in sizes)
        self.size = [int(s) if s is not None else 0 for s in sizes]
        rates = [p.bytes_in_per_s for p in res.scope]
        self.rates_known = bool(rates) and all(r is not None for r in rates)
        self.rate = [float(r or 0.0) for r in rates]
        #: what phase 2 balances: the first of the balance goals (disk use, network-in use, replica
        #: counts) in the goal order whose data is there; "count" when none is
        self.primary = self._primary()
        self.bytes_mode = self.primary == "disk-usage"
        self.weighted = self.primary in ("disk-usage", "nw-in-usage")
        if self.primary == "nw-in-usage":  # milli-bytes/s: integers like every other weight
            self.w = [int(round(r * 1000)) for r in self.rate]
        else:
            self.w = self.size if self.bytes_mode else [1] * len(sizes)
        rack_of = {b: topo.rack_of(b) for b in self.allowed}
        self.tree = RackTree.build(rack_of)
        self.safety = RackSafety(self.tree)
        self.leaf = self.safety.leaf
        self.leaf_members: dict[int, list[int]] = defaultdict(list)
        for b in self.allowed:
            self.leaf_members[self.leaf[b]].append(b)
        self.load: dict[int, int] = {b: 0 for b in self.allowed}
        #: each broker's share of the weighted balance target (its disk or network-in capacity)
        #: where brokers differ and every one's is known; None: equal shares (targets the mean)
        self.capw: dict[int, int] | None = self._capacity_weights()
        #: the heaps' key: the load, or the load per unit of capacity where capacities differ
        self.key: dict[int, float] = self.load if self.capw is None else {b: 0.0 for b in self.allowed}
        self.on: dict[int, dict[int, None]] = {b: {} for b in self.allowed}
        self.minheap: list[tuple[int, int]] = []
        self.maxheap: list[tuple[int, int]] = []
        self.heaps_live = True  # (False: no phase reads them again unless rebuilt; run() says so)
        self.budget = _Budget(max_moves, max_bytes)
        self.gen: dict[int, int] = {b: 0 for b in self.allowed}
        #: the disk limit (bytes) of brokers whose capacity and sizes are known, and each one's
        #: use at the peak of the plan: what it holds now plus every replica the plan adds to it
        #: so far (set by :meth:`limit_disks`; empty: no disk limit)
        self.disk_threshold = DISK_THRESHOLD
        self.disk_limit: dict[int, float] = {}
        self.disk_peak: dict[int, float] = {}
        #: the network-in limit (bytes/s) of brokers whose NW_IN capacity and every partition's
        #: rate are known, and each one's network-in after the moves so far (:meth:`limit_network`)
        self.nw_limit: dict[int, float] = {}
        self.nw_in: dict[int, float] = {}
        #: the partition :meth:`_pick_add` finds a broker for (its disk check needs the size)
        self._placing: int | None = None
        #: partitions each broker is the preferred leader of (replica index 0), kept current
        self.leads: Counter[int] = Counter(r[0] for r in self.reps if r)
        #: of those, the RF-1 partitions: leaderships no reordering can move
        self.pinned: Counter[int] = Counter(r[0] for r in self.reps if len(r) == 1)
        self.neg: dict[tuple[int, int], int] = {}
        self._sorted: dict[int, tuple[int, list[int], list[int]]] = {}
        self.unrepaired: set[int] = set()
        self._scanned = False
        self._heap_members: list[int] = self.allowed
        self.rebalance = True
        # leaf of every known broker in the allowed tree's terms (None: not an allowed rack)
        self._rack_leaf_by_rack: dict[str | None, int] = {}
        for b in self.allowed:
            self._rack_leaf_by_rack.setdefault(rack_of[b], self.leaf[b])

    def topo_leaf(self, b: int) -> int | None:
        """Leaf index (in the allowed tree) of broker ``b``'s rack, also for removed brokers."""
        if b in self.leaf:
            return self.leaf[b]
        r = self.topo.rack_of(b)
        return self._rack_leaf_by_rack.get(r) if r is not None else None

    # -- heaps ----------------------------------------------------------------------------------
    def _push(self, b: int) -> None:
        heapq.heappush(self.minheap, (self.key[b], b))
        heapq.heappush(self.maxheap, (-self.key[b], b))

    def _rebuild_heaps(self, members: list[int] | None = None) -> None:
        self.heaps_live, self._heap_members = True, self.allowed if members is None else members
        self.minheap = [(self.key[b], b) for b in self._heap_members]
        heapq.heapify(self.minheap)
        self.maxheap = [(-self.key[b], b) for b in self._heap_members]
        heapq.heapify(self.maxheap)

    def _ascending(self, accept) -> int | None:
        """Pop brokers by (load, id) until ``accept(b)`` returns 1 (found) or -1 (stop)."""
        assert self.heaps_live, "the heaps were let go after phase 2: rebuild them first"
        heap, load = self.minheap, self.key
        popped: list[tuple[int, int]] = []
        seen: set[int] = set()
        found = None
        while heap:
            entry = heapq.heappop(heap)
            ld, b = entry
            if load[b] != ld or b in seen:
                continue
            seen.add(b)
            popped.append(entry)
            verdict = accept(b)
            if verdict > 0:
                found = b
                break
            if verdict < 0:
                break
        for e in popped:
            heapq.heappush(heap, e)
        if len(heap) > 4 * len(self._heap_members) + 64:
            self.minheap = [(load[b], b) for b in self._heap_members]
            heapq.heapify(self.minheap)
        return found

    # -- bookkeeping ----------------------------------------------------------------------------
    def _cost(self, p: int, new: Sequence[int]) -> tuple[int, int]:
        o = self.orig[p]
        added = [b for b in new if b not in o]
        return len(added), len(added) * self.size[p]

    def _set_replicas(self, p: int, new: list[int]) -> None:
        old = self.reps[p]
        if self.nw_in:
            for b in old:
                if b in self.nw_in and b not in new:
                    self.nw_in[b] -= self.rate[p]
            for b in new:
                if b in self.nw_in and b not in old:
                    self.nw_in[b] += self.rate[p]
        if self.disk_limit:
            orig = self.orig[p]
            for b in new:
                if b in self.disk_peak and b not in orig and b not in old:
                    self.disk_peak[b] += self.size[p]
            for b in old:
                if b in self.disk_peak and b not in orig and b not in new:
                    self.disk_peak[b] -= self.size[p]
        if old:
            self.leads[old[0]] -= 1
            if len(old) == 1:
                self.pinned[old[0]] -= 1
        if new:
            self.leads[new[0]] += 1
            if len(new) == 1:
                self.pinned[new[0]] += 1
        w = self.w[p]
        for b in old:
            if b in self.load:
                self.load[b] -= w
                del self.on[b][p]
        for b in new:
            if b in self.load:
                self.load[b] += w
                self.on[b][p] = None
        if self.capw is not None:
            for b in chain(old, new):
                if b in self.load:
                    self._rekey(b)
        changed = set(old) ^ set(new)
        for b in set(old) | set(new):
            if b in self.gen and (b in changed and b in new or b not in changed):
                self.gen[b] += 1
        for b in changed if self.heaps_live else ():
            if b in self.load:
                self._push(b)
        self.reps[p] = new

    # -- phase 1: repair -------------------------------------------------------------------------
    def _keep(self, p: int) -> list[int]:
        seen: set[int] = set()
        keep = []
        for b in self.reps[p]:
            if b in self.allowed_set and b not in seen:
                keep.append(b)
                seen.add(b)
        return keep

    def _pick_add(self, cur: list[int], prefer_leaf: int | None, exclude: Iterable[int] = ()) -> int:
        """Least-loaded allowed broker whose addition keeps ``cur`` rack-safe."""
        excl = set(cur) | set(exclude)
        safe = self.safety.safe_distinct
        load = self.key

        fits = self._fits_disk
        p_now = self._placing

        def accept(b: int) -> int:
            return 1 if b not in excl and safe(cur + [b]) and (p_now is None or fits(b, p_now)) else 0

        best = self._ascending(accept)
        if best is None and p_now is not None and self.limited:
            # nowhere within the disk limit: where it is most even (the report names the brokers)
            best = self._ascending(lambda b: 1 if b not in excl and safe(cur + [b]) else 0)
        if prefer_leaf is not None and best is not None and self.leaf[best] != prefer_leaf:
            same = [
                b for b in self.leaf_members.get(prefer_leaf, ())
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

    def _descend(self, cur: Sequence[int], excl: set[int]) -> int:
        """The most even placement level by level (used when ``cur`` itself is not rack-safe)."""
        tree = self.tree
        counts = [defaultdict(int) for _ in range(tree.depth)]
        for b in cur:
            for lvl in range(tree.depth):
                counts[lvl][tree.level_of[lvl][b]] += 1
        best_key = None
        best = -1
        for b in self.allowed:
            if b in excl:
                continue
            key = tuple(counts[lvl][tree.level_of[lvl][b]] for lvl in range(tree.depth)) + (self.key[b], b)
            if best_key is None or key < best_key:
                best_key, best = key, b
        if best < 0:
            raise AssertionError("no broker left to add (feasibility was checked)")
        return best

    def _unevenness(self, reps: Sequence[int]) -> tuple[int, ...]:
        tree = self.tree
        out = []
        for lvl in range(tree.depth):
            c: dict[tuple[str, ...], int] = defaultdict(int)
            for b in reps:
                c[tree.level_of[lvl][b]] += 1
            out.append(sum(v * v for v in c.values()))
        return tuple(out)

    def _drop_one(self, cur: list[int]) -> int:
        """Which replica to drop when the RF goes down: keep rack-safety, spare the leader."""
        load = self.load
        best = None
        best_key = None
        for i, b in enumerate(cur):
            rest = cur[:i] + cur[i + 1 :]
            key = (
                0 if self.safety.safe_distinct(rest) else 1,
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
        rf = self.rf[p]
        cur = list(keep)
        while len(cur) > rf:
            cur.remove(self._drop_one(cur))
        # leaf of each replica being replaced, to prefer in-rack replacements
        gone = [b for b in old if b not in cur]
        gone_leaf = [self.topo_leaf(b) for b in gone]
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
        guard = 4 * rf * self.tree.depth + 4
        while not self.safety.safe(new) and guard > 0:
            guard -= 1
            best = None
            best_key = None
            for j, b in enumerate(new):
                rest = new[:j] + new[j + 1 :]
                c = self._descend(rest, set(new))
                cand = rest[:j] + [c] + rest[j:]
                key = (0 if self.safety.safe(cand) else 1, self._unevenness(cand), -self.load[b], 1 if j == 0 else 0, c)
                if best_key is None or key < best_key:
                    best_key, best = key, cand
            assert best is not None
            if self._unevenness(best) >= self._unevenness(new) and not self.safety.safe(best):
                break
            new = best
        # place the result in the old slots: replacements take the slot of what they replace
        return _in_place(old, new)

    def prepare(self) -> None:
        """One pass: kept replicas per partition, loads, which partitions need repair, and the
        counts the lower bound is computed from."""
        allowed_set = self.allowed_set
        safe = self.safety.safe_distinct
        load, on, w, rfs = self.load, self.on, self.w, self.rf
        keeps: list[list[int]] = []
        todo: list[int] = []
        need_total = need_bytes = repairs = repair_bytes = 0
        drop_parts: list[int] = []
        for p, r in enumerate(self.reps):
            rf = rfs[p]
            if len(r) == rf and allowed_set.issuperset(r) and (rf < 2 or len(set(r)) == rf):
                keep = r
                if not safe(keep):
                    todo.append(p)
                    repairs += 1
                    repair_bytes += self.size[p]
            else:
                keep = self._keep(p)
                todo.append(p)
                need = rf - len(keep)
                if need > 0:
                    need_total += need
                    need_bytes += need * self.size[p]
                elif need < 0:
                    drop_parts.append(p)
                elif keep and not safe(keep):
                    repairs += 1
                    repair_bytes += self.size[p]
            keeps.append(keep)
            wp = w[p]
            for b in keep:
                load[b] += wp
                on[b][p] = None
        for b in self.allowed:
            self._rekey(b)
        kb_all = dict(load)  # kept weight per broker (bytes in bytes mode)
        kb_nodrop = dict(load)
        for p in drop_parts:
            for b in keeps[p]:
                kb_nodrop[b] -= w[p]
        kc_all = dict.fromkeys(self.allowed, 0)
        kc_all.update(Counter(chain.from_iterable(keeps)))
        kc_nodrop = dict(kc_all)
        for p in drop_parts:
            for b in keeps[p]:
                kc_nodrop[b] -= 1
        self.keeps = keeps
        self.todo = todo
        self.prep = {
            "need_total": need_total,
            "need_bytes": need_bytes,
            "repairs": repairs,
            "repair_bytes": repair_bytes,
            "kc_all": kc_all,
            "kc_nodrop": kc_nodrop,
            "kb_all": kb_all,
            "kb_nodrop": kb_nodrop,
        }

    def repair(self) -> None:
        self._rebuild_heaps()
        # loads count the kept replicas; self.reps[p] stays the original list until repaired
        for p in self.todo:
            keep = self.keeps[p]
            old = self.reps[p]
            new = self._repair_list(p, list(keep), old)
            mv, by = self._cost(p, new)
            if not self.budget.fits(mv, by):
                if self.budget.may_force() and mv > 0:
                    self.budget.forced = True  # force progress: one partition even over budget
                else:
                    self.budget.hit = True
                    self.unrepaired.add(p)
                    continue
            self.budget.spend(mv, by)
            # apply: loads currently hold ``keep``; switch them to ``new``
            self.reps[p] = list(keep)
            self._set_replicas(p, new)
        self.keeps = []

    # -- phase 2: balance -------------------------------------------------------------------------
    def balance(self) -> None:
        allowed = self.allowed
        n = len(allowed)
        if n < 2 or not self.reps:
            return
        # 1. over all allowed brokers; 2. inside every rack (moves inside a rack never break
        # rack-safety; this evens brokers of a rack whose load the rack rule pins, e.g. RF = racks:
        # by bytes too, where the global pass can stop a partition or two from the mean with the
        # only useful moves between racks, which the rack rule forbids)
        groups = [allowed, *(m for _, m in sorted(self.leaf_members.items()) if len(m) > 1)]
        for members in groups:
            self._balance_group(members)
            if self.budget.hit:
                return

    def _balance_group(self, members: list[int]) -> None:
        n = len(members) if self.capw is None else sum(self.capw[b] for b in members)  # the shares' sum
        total = sum(self.load[b] for b in members)
        floor_, ceil_ = total // n, -(-total // n)
        while True:
            frozen: set[int] = set()
            made = self._balance_pass(members, n, total, floor_, ceil_, frozen)
            # brokers set aside in this pass may have become movable through later moves
            if not made or not frozen or self.budget.hit:
                return

    def _balance_pass(self, members: list[int], n: int, total: int, floor_: int, ceil_: int, frozen: set[int]) -> int:
        """One pass of moves from the most to the least loaded brokers of ``members`` (``n``: the
        sum of their shares, see :meth:`_excess`; by count the number of brokers)."""
        bytes_mode = self.weighted
        dest = self.res.dest_only
        load = self.load
        key = self.key
        excess = self._excess
        self._rebuild_heaps(members)
        maxheap = self.maxheap
        made = 0

        def useful(ls: int, ld: int) -> bool:  # (by count; weighted: excess() of src > 0 > of dst)
            # into the band [floor, ceil]; or, where rack rules keep some broker out of reach, any
            # move from above the band that narrows the gap by two (the heap offers the least
            # loaded destinations first, so an unconstrained cluster never gets here)
            return (ls > ceil_ and ld < ceil_) or (ls > floor_ and ld < floor_) or (ls > ceil_ and ls - ld >= 2)

        while maxheap:
            negl, src = heapq.heappop(maxheap)
            if -negl != key[src] or src in frozen:
                continue
            ls = load[src]
            exc_src = excess(src, total, n) if bytes_mode else 0
            if (exc_src <= 0) if bytes_mode else (ls <= floor_):
                break  # nobody above the target: balanced
            scans = [0]
            choice: list[tuple[int, int]] = []
            # an RF-1 partition hands its leadership to where it goes and no reordering can give
            # it back: among destinations as loaded as the first that takes one, the broker with
            # the fewest such leaderships (then the fewest leaderships: the leader phase can hand
            # the others on) gets it, else leaders pile up on one broker
            rf1: list[tuple[tuple[int, int, int], int, int, float]] = []  # (order, p, dst, key)
            min_w = self._by_weight(src)[0][-1] * -1 if bytes_mode and self.on[src] else 0

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
                if dest is not None and dst not in dest:
                    return 0
                p = self._find_movable(src, dst, bound, n)
                if p is None:
                    if self._scanned:
                        scans[0] += 1
                        if scans[0] > 256:
                            return -1
                    return 0
                if len(self.reps[p]) == 1:
                    k = (self.pinned[dst], self.leads[dst], dst)
                    if not rf1 or k < rf1[0][0]:
                        rf1[:] = [(k, p, dst, key[dst])]
                    if k[0] or k[1]:
                        return 0  # look at the next destination as loaded
                choice.append((p, dst))
                return 1

            found = self._ascending(accept)
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
            r = self.reps[p]
            new = [dst if b == src else b for b in r]
            mv, by = self._cost(p, new)
            omv, oby = self._cost(p, r)
            dmv, dby = mv - omv, by - oby
            if not self.budget.fits(dmv, dby):
                self.budget.hit = True
                # a smaller partition might fit the byte budget; stop here to keep plans simple
                break
            self.budget.spend(dmv, dby)
            self._set_replicas(p, new)
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
        load = self.load
        reps = self.reps
        safe = self.safety.safe_distinct
        dsts = sorted((b for b in members if b != src and useful(ls, load[b])), key=lambda b: (load[b], b))
        mids = sorted((b for b in members if b != src and b not in dsts), key=lambda b: (load[b], b))
        if not dsts or not mids:
            return False
        budget = 4096  # partitions looked at: a bound for very large clusters
        for dst in dsts:
            for mid in mids:
                for q in self.on[mid]:
                    budget -= 1
                    if budget < 0:
                        return False
                    rq = reps[q]
                    if dst in rq or q in self.unrepaired:
                        continue
                    new_q = [dst if b == mid else b for b in rq]
                    if not safe(new_q) or not self._fits_disk(dst, q):
                        continue
                    for p in self.on[src]:
                        budget -= 1
                        rp = reps[p]
                        if p == q or mid in rp or p in self.unrepaired:
                            continue
                        new_p = [mid if b == src else b for b in rp]
                        if not safe(new_p) or not self._fits_disk(mid, p):
                            continue
                        cost = [(a - b, c - d) for (a, c), (b, d) in
                                ((self._cost(p, new_p), self._cost(p, rp)), (self._cost(q, new_q), self._cost(q, rq)))]
                        dmv, dby = sum(c[0] for c in cost), sum(c[1] for c in cost)
                        if not self.budget.fits(dmv, dby):
                            if not (self.budget.may_force() and dmv > 0):
                                self.budget.hit = True
                                return False
                            self.budget.forced = True
                        self.budget.spend(dmv, dby)
                        self._set_replicas(p, new_p)
                        self._set_replicas(q, new_q)
                        return True
                    break  # q can go to dst but no p of src can go to mid: try another mid
        return False

    def _by_weight(self, src: int) -> tuple[list[int], list[int]]:
        """``src``'s partitions heaviest first (ties in its order), as (negated weights, partitions);
        rebuilt when src gains or changes a partition (its ``gen``), a partition it lost since is
        skipped by the caller (``p in self.on[src]``)."""
        got = self._sorted.get(src)
        if got is None or got[0] != self.gen[src]:
            w = self.w
            ps = sorted(self.on[src], key=lambda p: -w[p])  # stable: ties keep src's order
            got = (self.gen[src], [-w[p] for p in ps], ps)
            self._sorted[src] = got
        return got[1], got[2]

    def _heaviest_movable(self, src: int, dst: int, bound_n: int, n: int, same: bool) -> tuple[int | None, bool]:
        """Weighted: the heaviest partition of ``src`` with ``n * weight <= bound_n`` that can go to
        ``dst`` (a follower before a leader of the same weight), and whether every partition
        refused was refused by rack-safety only. Walks src's partitions by weight from the bound
        down: what the full scan finds, without reading what is too heavy."""
        import bisect

        negw, ps = self._by_weight(src)
        start = bisect.bisect_left(negw, -(bound_n // n)) if n else 0
        only_rack = start == 0
        on, reps, unrepaired, w = self.on[src], self.reps, self.unrepaired, self.w
        fits = self._fits_disk if self.limited else None
        safe = self.safety.safe_distinct
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
        leaf = self.leaf
        ldst = leaf[dst]
        same = leaf[src] == ldst
        key = (src, ldst)
        self._scanned = False
        if not same and self.neg.get(key) == self.gen[src]:
            return None
        self._scanned = True
        if self.weighted:
            best, only_rack = self._heaviest_movable(src, dst, bound_n, n, same)
            if best is None and not same and only_rack:
                self.neg[key] = self.gen[src]
            return best
        safe = self.safety.safe_distinct
        reps = self.reps
        unrepaired = self.unrepaired
        only_rack_failures = True
        # by count: a follower first (moving a leader hands its partition to ``dst``; for RF 1,
        # where no reordering can give it back, leaders would pile up there)
        best = None
        looked = 0
        fits = self._fits_disk if self.limited else None
        for p in self.on[src]:
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
            self.neg[key] = self.gen[src]
        return best

    # -- run ---------------------------------------------------------------------------------------
    def run(self, *, throttle: int | None, compare_kafka: bool, kafka_seed: int) -> PlanResult:
        from kops.placement import goals, metrics
        from kops.placement.refine import Refiner

        before = {tp: tuple(r) for tp, r in zip(self.tps, self.orig)}
        self.prepare()
        lower = metrics.lower_bound(self)
        self.repair()
        refiner = Refiner(self)
        refined: dict[str, int] = {}
        if self.rebalance:
            self.balance()
            self.heaps_live = False  # (nothing reads them again)
            refined = refiner.run(self.goals)
        complete = not self.budget.hit and not self.unrepaired
        # phase 3: leadership by reordering (always complete; costs no data)
        scope_idx = [p for p in range(len(self.reps)) if p not in self.unrepaired]
        moved_parts = [p for p in scope_idx if self.reps[p] is not self.orig[p] and set(self.reps[p]) != set(self.orig[p])]
        followers = self.followers and "first-followers" in self.goals
        if "leaders" in self.goals:
            balance_orders(self.reps, scope_idx, self.allowed, followers=followers, prefer=moved_parts)
        # no needless leadership change: a replacement keeps the slot of the replica it replaces
        # and an order goes back to what it was wherever balance did not need the change
        restore_orders(self.reps, {p: _in_place(self.orig[p], self.reps[p]) for p in scope_idx
                                   if self.reps[p] != list(self.orig[p])}, self.allowed, followers=followers)
        if self.rebalance:
            refined.update(refiner.leadership(self.goals))
        target = {tp: tuple(r) for tp, r in zip(self.tps, self.reps)}
        changes = {tp: r for tp, r, o in zip(self.tps, target.values(), self.orig) if r != tuple(o)}
        self._verify(changes)
        kafka = metrics.kafka_generate(self, kafka_seed) if compare_kafka else None
        report = metrics.build_report(self, before, target, changes, lower, kafka, throttle, complete)
        report["goals_optimised"] = {"order": list(self.goals), "phase2": self.primary,
                                     "moves_per_goal": refined, "capacity_shares": self.capw is not None}
        # the goals' figures (issue 21); those the report has measured already are taken from it
        bal = report["balance"]
        known = {"rack": goals.figures("rack", "rack-unsafe partitions", report["rack_violations_before"],
                                       report["rack_violations_after"], 0, met=not report["rack_violations_after"])}
        slots = (("replicas", "replica", None), ("leaders", "leader", 0), ("first-followers", "first_follower", 1))
        for goal, key, slot in slots:
            after = bal[f"{key}_spread_after"]
            total = sum(len(r) if slot is None else int(len(r) > slot) for r in target.values())
            bound = goals.count_bound(total, len(self.allowed))
            known[goal] = goals.figures(goal, "spread (max - min per broker)", bal[f"{key}_spread_before"], after,
                                        bound, met=after <= max(bound, 1))
        full_before = self.topo.assignment()
        report["goals"] = goals.evaluate(self.topo, full_before, {**full_before, **target}, brokers=self.allowed,
                                         known=known, threshold=self.disk_threshold, nw_threshold=goals.DEFAULT_THRESHOLD)
        return PlanResult(self.goal, target, changes, report, complete, before)

    def _verify(self, changes: dict[TopicPartition, tuple[int, ...]]) -> None:
        """Hard constraints of every changed partition, checked with the one definition."""
        from kops.placement.racks import rack_violation

        idx = {tp: i for i, tp in enumerate(self.tps)}
        for tp, r in changes.items():
            p = idx[tp]
            if p in self.unrepaired:
                continue
            problems = []
            if len(set(r)) != len(r):
                problems.append("duplicate broker")
            if len(r) != self.rf[p]:
                problems.append(f"{len(r)} replicas, expected {self.rf[p]}")
            if any(b not in self.allowed_set for b in r):
                problems.append("broker not allowed")
            if not self.safety.safe(r):
                problems.append(rack_violation(r, self.tree) or "not rack-safe")
            if problems:  # a planner bug: never emit such a plan
                raise AssertionError(f"planner produced an invalid list for {tp[0]}-{tp[1]}: {r}: {problems}")


def _in_place(old: Sequence[int], new: Sequence[int]) -> list[int]:
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

