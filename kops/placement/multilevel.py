"""Multi-level rack-aware assignment for path racks (``/dc1/r1``): spread each partition over as
many top-level domains as possible, then over racks inside them, and keep replica and leader
counts even (±1) per domain at every level wherever the topology allows it.

The guarantee, its conditions and why Cloudera's tree-iterator algorithm is not enough on its own
are written down in ``docs/multi-level-racks.md``. In short:

1. **Replica sets** (hard, always): every partition is rack-safe in the sense of
   :func:`kops.placement.racks.rack_violation` -- distinct brokers, and inside every domain its
   replicas are spread over the child domains as evenly as their broker counts allow. The quota of
   each domain is split water-filling style; which children get the "+1" shares is decided by a
   tree round-robin that always serves the least-loaded child first (Cloudera's tree iterator,
   made load-aware), so totals stay within ±1 among the children of every domain whose children
   hold equal broker counts.
2. **Leaders** (re-ordering only, no data placement change): nested targets -- the root leads
   all partitions, a domain with target ``[lo, hi]`` and ``k`` children gives each child
   ``[floor(lo/k), ceil(hi/k)]`` -- met exactly by a max-flow with lower and upper bounds over the
   distinct replica sets, whenever *any* choice of leaders within the replica sets meets them
   (siblings then differ by at most 1 at every level). Otherwise, level by level from the top,
   the smallest feasible widening of the targets.

On a *uniform* tree (at every level each domain has the same number of children, every rack the
same number of brokers) replica counts per domain differ by at most 1 across every whole level,
per broker too, for any number of partitions; leader counts too whenever some leader choice within
the replica sets allows it (in every uniform case tested it did; not proven).

Deterministic: the same brokers, RF, partition count and fixed start index give the same result.
``fixed_start_index < 0`` draws the start index from ``rng`` (as Kafka draws its own).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping, Sequence

from kops.errors import BadInput
from kops.placement.collector import paused
from kops.placement.racks import rack_path, validate_racks

__all__ = ["MultiLevelTree", "assign_replicas_multilevel", "level_counts"]


class MultiLevelTree:
    """The failure-domain tree of a set of brokers with path racks.

    Nodes are integers: 0 is the root (the whole cluster), then domains level by level, then the
    brokers (the leaves). ``level[node]``: 0 root, 1 top-level domain, ..., ``depth`` rack,
    ``depth + 1`` broker.
    """

    def __init__(self, racks: Mapping[int, str]):
        depth = validate_racks(racks, require_all=True)
        if depth == 0:
            raise BadInput("multi-level assignment needs a rack for every broker")
        self.depth = depth
        paths = {b: rack_path(r) for b, r in racks.items()}
        self.name: list[tuple[str, ...]] = [()]
        self.level: list[int] = [0]
        self.parent: list[int] = [-1]
        self.kids: list[list[int]] = [[]]
        self.broker_of: list[int | None] = [None]
        index: dict[tuple[str, ...], int] = {(): 0}
        for lvl in range(1, depth + 1):
            for prefix in sorted({p[:lvl] for p in paths.values()}):
                node = len(self.name)
                index[prefix] = node
                self.name.append(prefix)
                self.level.append(lvl)
                par = index[prefix[:-1]]
                self.parent.append(par)
                self.kids.append([])
                self.broker_of.append(None)
                self.kids[par].append(node)
        self.node_of: dict[int, int] = {}
        for b in sorted(paths):
            node = len(self.name)
            self.node_of[b] = node
            self.name.append(paths[b] + (str(b),))
            self.level.append(depth + 1)
            par = index[paths[b]]
            self.parent.append(par)
            self.kids.append([])
            self.broker_of.append(b)
            self.kids[par].append(node)
        self.cap = [0] * len(self.name)  # brokers under each node
        for node in self.node_of.values():
            x = node
            while x >= 0:
                self.cap[x] += 1
                x = self.parent[x]
        # ancestors[node] = path from the root's child down to the node itself
        self.path: list[tuple[int, ...]] = [()] * len(self.name)
        for node in range(1, len(self.name)):
            self.path[node] = self.path[self.parent[node]] + (node,)

    @property
    def n_brokers(self) -> int:
        return len(self.node_of)

    def domain_name(self, node: int) -> str:
        return "/" + "/".join(self.name[node][: self.depth]) if self.level[node] <= self.depth else str(self.broker_of[node])



def assign_replicas_multilevel(
    brokers: Sequence[tuple[int, str | None]],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    *,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Multi-level rack-aware assignment: ``{partition id: [broker ids]}``, preferred leader first.

    Same calling convention as :func:`kops.placement.kafka_assign.assign_replicas_to_brokers`.
    Partition ids start at ``max(0, start_partition_id)``; the start index rotates the tie-breaking
    order at every domain (so topics created one after another do not all start on the same
    brokers). Raises :class:`BadInput` for bad counts or racks (Kafka's wording for the counts).
    """
    if n_partitions <= 0:
        raise BadInput("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise BadInput("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise BadInput(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}."
        )
    racks: dict[int, str | None] = {}
    for b, r in brokers:
        if b in racks:
            raise BadInput(f"broker {b} is listed twice")
        racks[b] = r
    missing = sorted(b for b, r in racks.items() if r is None)
    if missing:
        raise BadInput(
            "Not all brokers have rack information for replica rack aware assignment.",
            details=[f"brokers without a rack: {missing}"],
        )
    tree = MultiLevelTree(racks)  # type: ignore[arg-type]
    if fixed_start_index >= 0:
        start = fixed_start_index
    else:
        start = (rng or random.Random()).randrange(tree.n_brokers)
    first_pid = max(0, start_partition_id)
    with paused():  # many small lists, no reference cycles (:mod:`kops.placement.collector`)
        replica_sets = _choose_replicas(tree, n_partitions, replication_factor, start)
        leaders = _choose_leaders(tree, replica_sets, start)
        return {first_pid + i: _order(tree, reps, leaders[i]) for i, reps in enumerate(replica_sets)}


# -- replica sets -------------------------------------------------------------------------------
def _choose_replicas(tree: MultiLevelTree, n_partitions: int, rf: int, start: int) -> list[list[int]]:
    """Per partition, split RF top-down: water-filling over children (capacity = brokers under a
    child), extra shares to the least-loaded children first, ties in rotating order."""
    kids, cap = tree.kids, tree.cap
    cnt = [0] * len(kids)
    cursor = [start % len(k) if k else 0 for k in kids]
    leaf_parent = [bool(k) and not kids[k[0]] for k in kids]
    regular = [bool(k) and len({cap[c] for c in k}) == 1 for k in kids]
    todo: list[tuple[int, int]] = []
    out: list[list[int]] = []
    n = tree.n_brokers
    sib = [0] * len(kids)
    for ks in kids:
        for j, c in enumerate(ks):
            sib[c] = j
    for done in range(n_partitions):
        if done and done % n == 0:
            # After every n partitions, shift the phase between sibling domains (the j-th child of
            # a domain advances its own cursor by j more), so that the same brokers are not paired
            # in every round -- Kafka's "nextReplicaShift" idea. Only where the siblings hold equal
            # counts, so that the rotation still serves the least loaded first.
            for x in range(1, len(kids)):
                if kids[x] and sib[x]:
                    if len({cnt[c] for c in kids[x]}) == 1:
                        cursor[x] = (cursor[x] + sib[x]) % len(kids[x])
        chosen: list[int] = []
        stack = [(0, rf)]
        while stack:
            node, quota = stack.pop()
            ks = kids[node]
            if not ks:
                chosen.append(node)
                continue
            k = len(ks)
            cur = cursor[node]
            if regular[node]:
                # children of equal capacity: their counts never differ by more than one, so
                # "least loaded first, ties in rotating order" is plain round-robin from the cursor
                q, r = divmod(quota, k)
                for j in range(k if q else r):
                    c = ks[(cur + j) % k]
                    g = q + (1 if j < r else 0)
                    cnt[c] += g
                    if leaf_parent[node]:
                        chosen.append(c)
                    else:
                        todo.append((c, g))
                cursor[node] = (cur + r) % k
                if todo:
                    stack.extend(reversed(todo))
                    todo.clear()
                continue
            order = sorted(range(k), key=lambda i: (cnt[ks[i]], (i - cur) % k))
            given = [0] * k
            remaining = quota
            while remaining:
                for i in order:
                    if remaining and given[i] < cap[ks[i]]:
                        given[i] += 1
                        remaining -= 1
            cursor[node] = (cur + quota) % k
            for i in reversed(order):  # stack: served in preference order
                if given[i]:
                    cnt[ks[i]] += given[i]
                    stack.append((ks[i], given[i]))
        out.append(chosen)  # broker nodes
    return out


# -- leaders ------------------------------------------------------------------------------------
def _choose_leaders(tree: MultiLevelTree, replica_sets: list[list[int]], start: int) -> list[int]:
    """Pick one leader per partition among its own replicas so that leader counts meet nested ±1
    targets at every level (a flow problem with lower and upper bounds, see the module doc).

    Partitions with the same replica set are interchangeable, so the flow network has one node per
    distinct replica set: it stays small however many partitions there are.
    """
    n_part = len(replica_sets)
    types: dict[tuple[int, ...], list[int]] = {}
    for i, reps in enumerate(replica_sets):
        types.setdefault(tuple(sorted(reps)), []).append(i)
    lo, hi = _nested_targets(tree, n_part)
    max_level = tree.depth + 1
    widen = [0] * (max_level + 1)  # index = level
    # usually every level's targets are feasible at once: one flow
    flows = _leader_flow(tree, types, n_part, lo, hi, widen, max_level)
    for lvl in range(1, max_level + 1) if flows is None else ():
        # the smallest widening of this level's targets that is feasible with the levels above
        if (f := _leader_flow(tree, types, n_part, lo, hi, widen, lvl)) is not None:
            flows = f
            continue
        low, high = 1, n_part
        while low < high:
            mid = (low + high) // 2
            widen[lvl] = mid
            if _leader_flow(tree, types, n_part, lo, hi, widen, lvl) is not None:
                high = mid
            else:
                low = mid + 1
        widen[lvl] = low
        flows = _leader_flow(tree, types, n_part, lo, hi, widen, lvl)
    assert flows is not None  # widening n_part at every level is always feasible
    leaders = [0] * n_part
    rot = start
    for key, parts in types.items():
        quota = flows[key]  # {broker node: partitions of this type it leads}
        order = [b for b in key if quota.get(b)]
        # deal leaderships round-robin so that any prefix of the type is spread too
        k = len(order)
        left = dict(quota)
        j = rot % k if k else 0
        for i in parts:
            while not left[order[j]]:
                j = (j + 1) % k
            leaders[i] = order[j]
            left[order[j]] -= 1
            j = (j + 1) % k
        rot += 1
    return leaders


def _nested_targets(tree: MultiLevelTree, n_part: int) -> tuple[list[int], list[int]]:
    """Leader targets: the root leads all; a node with bounds [lo, hi] and k children gives each
    child [floor(lo / k), ceil(hi / k)] -- at most one apart, so siblings within targets differ by
    at most 1 (and on a uniform tree every node of a level has the same targets)."""
    size = len(tree.kids)
    lo = [0] * size
    hi = [0] * size
    lo[0] = hi[0] = n_part
    for x in range(size):  # parents come before children in node order
        ks = tree.kids[x]
        if ks:
            k = len(ks)
            for c in ks:
                lo[c] = lo[x] // k
                hi[c] = -(-hi[x] // k)
    return lo, hi


def _leader_flow(tree, types, n_part, lo, hi, widen, upto_level):
    """Feasible leader counts with bounds on levels 1..upto_level, or None."""
    size = len(tree.kids)
    net = _FlowNet()
    # node ids: 0 = S, 1 = T, 2.. tree nodes (2 + x), then types
    S, T = 0, 1
    base = 2
    net.ensure(base + size)
    type_ids = {key: net.add_node() for key in types}
    for key, parts in types.items():
        t = type_ids[key]
        net.add_edge(S, t, len(parts), len(parts))
        for b in key:
            net.add_edge(t, base + b, 0, len(parts))
    for x in range(1, size):
        lvl = tree.level[x]
        if lvl <= upto_level:
            w = widen[lvl]
            lower, upper = max(0, lo[x] - w), hi[x] + w
        else:
            lower, upper = 0, n_part
        net.add_edge(base + x, base + tree.parent[x], lower, upper)
    net.add_edge(base + 0, T, n_part, n_part)
    if not net.feasible(S, T):
        return None
    out = {}
    for key in types:
        t = type_ids[key]
        out[key] = {e_to - base: f for e_to, f in net.flows_from(t) if f}
    return out


class _FlowNet:
    """Max-flow (Dinic) with lower bounds, for small graphs."""

    def __init__(self) -> None:
        self.n = 2
        self.adj: list[list[int]] = [[], []]
        self.to: list[int] = []
        self.cap: list[int] = []
        self.excess: list[int] = [0, 0]
        self.orig: list[tuple[int, int, int]] = []  # (edge index, lower, from)
        self.lower: dict[int, int] = {}

    def add_node(self) -> int:
        self.adj.append([])
        self.excess.append(0)
        self.n += 1
        return self.n - 1

    def ensure(self, n: int) -> None:
        while self.n < n:
            self.add_node()

    def _arc(self, u: int, v: int, c: int) -> int:
        self.adj[u].append(len(self.to))
        self.to.append(v)
        self.cap.append(c)
        self.adj[v].append(len(self.to))
        self.to.append(u)
        self.cap.append(0)
        return len(self.to) - 2

    def add_edge(self, u: int, v: int, lower: int, upper: int) -> None:
        if upper < lower:
            upper = lower - 1  # infeasible on purpose: never satisfiable
        e = self._arc(u, v, max(0, upper - lower))
        self.orig.append((e, lower, u))
        self.lower[e] = lower
        self.excess[v] += lower
        self.excess[u] -= lower

    def feasible(self, s: int, t: int) -> bool:
        if any(self.cap[e] < 0 for e, _, _ in self.orig):
            return False
        big = sum(abs(x) for x in self.excess) + 1
        self._arc(t, s, big)
        ss = self.add_node()
        tt = self.add_node()
        need = 0
        for v in range(self.n - 2):
            if self.excess[v] > 0:
                self._arc(ss, v, self.excess[v])
                need += self.excess[v]
            elif self.excess[v] < 0:
                self._arc(v, tt, -self.excess[v])
        return self._maxflow(ss, tt) == need

    def flows_from(self, u: int):
        lower = self.lower
        for e in self.adj[u]:
            if e % 2 == 0 and e in lower:
                # flow on an arc = its reverse arc's residual capacity, plus its lower bound
                yield self.to[e], self.cap[e + 1] + lower[e]

    def _maxflow(self, s: int, t: int) -> int:
        total = 0
        to, cap, adj = self.to, self.cap, self.adj
        while True:
            level = [-1] * self.n
            level[s] = 0
            q = deque([s])
            while q:
                u = q.popleft()
                for e in adj[u]:
                    if cap[e] > 0 and level[to[e]] < 0:
                        level[to[e]] = level[u] + 1
                        q.append(to[e])
            if level[t] < 0:
                return total
            it = [0] * self.n

            def dfs(u: int, f: int) -> int:
                if u == t:
                    return f
                while it[u] < len(adj[u]):
                    e = adj[u][it[u]]
                    v = to[e]
                    if cap[e] > 0 and level[v] == level[u] + 1:
                        d = dfs(v, min(f, cap[e]))
                        if d:
                            cap[e] -= d
                            cap[e ^ 1] += d
                            return d
                    it[u] += 1
                return 0

            while True:
                f = dfs(s, 1 << 62)
                if not f:
                    break
                total += f


# -- replica order ------------------------------------------------------------------------------
def _order(tree: MultiLevelTree, reps: list[int], leader: int) -> list[int]:
    """Leader first; then followers alternating over top-level domains (then racks), starting
    with the domain after the leader's, so the first follower sits in another domain if possible."""
    path = tree.path
    followers = [r for r in reps if r != leader]
    if len(followers) > 1:
        # round-robin interleave by the tree: rank each follower within its top domain
        lead_top = path[leader][0]
        tops = sorted({path[r][0] for r in followers}, key=lambda t: (t == lead_top, t))
        by_top: dict[int, list[int]] = {t: [] for t in tops}
        for r in sorted(followers, key=lambda r: (path[r], r)):
            by_top[path[r][0]].append(r)
        for t in tops:
            by_top[t] = _interleave_below(tree, by_top[t], 1)
        ordered: list[int] = []
        while len(ordered) < len(followers):
            for t in tops:
                if by_top[t]:
                    ordered.append(by_top[t].pop(0))
        followers = ordered
    return [tree.broker_of[leader]] + [tree.broker_of[r] for r in followers]  # type: ignore[list-item]


def _interleave_below(tree: MultiLevelTree, nodes: list[int], lvl: int) -> list[int]:
    if len(nodes) <= 1 or lvl >= tree.depth:
        return nodes
    groups: dict[int, list[int]] = {}
    for r in nodes:
        groups.setdefault(tree.path[r][lvl], []).append(r)
    lists = [_interleave_below(tree, g, lvl + 1) for _, g in sorted(groups.items())]
    out: list[int] = []
    while len(out) < len(nodes):
        for lst in lists:
            if lst:
                out.append(lst.pop(0))
    return out


# -- reporting ----------------------------------------------------------------------------------
def level_counts(assignment: Mapping[int, Sequence[int]], racks: Mapping[int, str]) -> list[dict[str, tuple[int, int]]]:
    """Per level (1 = top ... depth = rack, depth + 1 = broker): ``{domain: (replicas, leaders)}``,
    including domains that got nothing."""
    tree = MultiLevelTree(racks)
    reps = [0] * len(tree.kids)
    leads = [0] * len(tree.kids)
    for replicas in assignment.values():
        for j, b in enumerate(replicas):
            for x in tree.path[tree.node_of[b]]:
                reps[x] += 1
                if j == 0:
                    leads[x] += 1
    out: list[dict[str, tuple[int, int]]] = []
    for lvl in range(1, tree.depth + 2):
        out.append(
            {tree.domain_name(x): (reps[x], leads[x]) for x in range(len(tree.kids)) if tree.level[x] == lvl}
        )
    return out
