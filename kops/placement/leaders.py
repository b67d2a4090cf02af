"""Leadership balancing by reordering replica lists: no data moves, replica *sets* unchanged.

Two stages over the same machinery (the "staged max-flow" idea, run as augmenting paths):

1. **preferred leaders** (replica index 0): every broker's count of partitions it is the preferred
   leader of ends within max - min <= 1 wherever the replica sets allow it;
2. **first followers** (replica index 1), with the leaders fixed: the broker that takes over when
   a leader fails is spread the same way, so leadership stays balanced when any one broker fails.

Each stage starts from the current order and changes only what it must: a partition is reordered
only along an augmenting path ``u0 -p1-> u1 -p2-> ... -> uk`` that moves one unit of count from a
broker at the maximum ``M`` to a broker at ``<= M - 2`` (intermediate brokers keep their count).
When no such path exists from the brokers at the maximum, that maximum is optimal (the standard
optimality condition for balancing a bipartite assignment); those brokers are set aside and the
next level is tried. The result minimises max - min exactly, for each stage.

Brokers outside ``brokers`` (e.g. dead, or being demoted) never become preferred leader or first
follower of a partition that has an eligible replica; a partition whose current holder is not
eligible is reordered first.

Complexity: one breadth-first search per unit of imbalance; it stops at the first broker below
``M - 2`` it reaches, which for realistic clusters is a direct neighbour. Integers and lists only.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Collection, Iterable, Mapping, Sequence

from kops.model import TopicPartition, Topology

__all__ = ["balance_leaders", "balance_orders", "restore_orders", "slot_counts"]


def balance_leaders(
    topology_or_assignment: Topology | Mapping[TopicPartition, Sequence[int]],
    *,
    brokers: Iterable[int] | None = None,
    partitions: Iterable[TopicPartition] | None = None,
    followers: bool = True,
) -> dict[TopicPartition, tuple[int, ...]]:
    """Reorder replica lists so preferred leaders (and first followers) are balanced per broker.

    ``topology_or_assignment``: a :class:`Topology` or ``{(topic, partition): replicas}``.
    ``brokers``: the brokers whose counts are balanced and that may lead (default: the alive
    brokers of a topology, or every broker named in an assignment). ``partitions``: only these may
    be reordered (default: all); counts still include every partition. Returns the full assignment
    ``{tp: replicas}`` with every replica set unchanged; only the order differs. Deterministic.
    """
    if isinstance(topology_or_assignment, Topology):
        assignment = topology_or_assignment.assignment()
        default_brokers: Iterable[int] = topology_or_assignment.alive_broker_ids
    else:
        assignment = dict(topology_or_assignment)
        default_brokers = {b for r in assignment.values() for b in r}
    eligible = sorted(set(brokers if brokers is not None else default_brokers))
    tps = sorted(assignment)
    reps = [list(assignment[tp]) for tp in tps]
    if partitions is None:
        scope: list[int] = list(range(len(tps)))
    else:
        wanted = set(partitions)
        scope = [i for i, tp in enumerate(tps) if tp in wanted]
    balance_orders(reps, scope, eligible, followers=followers)
    return {tp: tuple(r) for tp, r in zip(tps, reps)}


def balance_orders(
    reps: list[list[int]],
    scope: Sequence[int],
    eligible: Collection[int],
    *,
    followers: bool = True,
    prefer: Collection[int] = (),
) -> None:
    """In place: reorder ``reps[p]`` for ``p`` in ``scope`` (leaders, then first followers).

    ``prefer``: partitions that change anyway (new replicas); reorders pick them first so that
    fewer other partitions change.
    """
    if prefer:
        pref = set(prefer)
        scope = [p for p in scope if p in pref] + [p for p in scope if p not in pref]
    _balance_slot(reps, scope, eligible, 0)
    if followers:
        _balance_slot(reps, scope, eligible, 1)
        if _swap_pass(reps, scope, eligible):
            _balance_slot(reps, scope, eligible, 1)


def restore_orders(reps: list[list[int]], natural: Mapping[int, Sequence[int]], eligible: Collection[int],
                   *, followers: bool = True, held: Collection[int] = ()) -> int:
    """In place: give partition ``p`` its ``natural[p]`` order back (the same replicas in the
    order nobody would notice: its current order, or a replacement in the slot of the replica it
    replaces) wherever the balanced order differs from it and going back leaves the spread
    (max - min) of preferred leaders, and of first followers with ``followers``, no wider than it
    is. Balancing picks one of several equally balanced orders and can reorder a list that, at the
    end, needed no reordering: that would move a preferred leader (a leadership change once
    elected) for nothing. A slot is never given back to a broker outside ``eligible`` that an
    eligible broker holds now. ``held``: brokers held below the others (cordoned, taking no new
    replica): left out of the minimum, so that their low counts do not let the others' spread
    widen. Deterministic (by partition index); returns how many were restored."""
    elig = set(eligible)
    slots = (0, 1) if followers else (0,)
    counts = [slot_counts(reps, elig, s) for s in slots]
    # per slot: how many brokers hold each count, so max / min are read without a scan (the
    # minimum's over the brokers not ``held``)
    freq = [Counter(c.values()) for c in counts]
    held = set(held) & elig
    lows = [Counter(x for b, x in c.items() if b not in held) for c in counts] if held else freq

    def shift(i: int, b: int, d: int) -> None:
        for f in ((freq[i], lows[i]) if held and b not in held else (freq[i],)):
            f[counts[i][b]] -= 1
            if not f[counts[i][b]]:
                del f[counts[i][b]]
            f[counts[i][b] + d] += 1
        counts[i][b] += d

    def spread(i: int) -> int:
        return max(freq[i]) - min(lows[i]) if lows[i] else 0

    # (only the lists out of their natural order, holding the same brokers, can go back)
    restored, todo = 0, [p for p in sorted(natural) if reps[p] != natural[p] and sorted(reps[p]) == sorted(natural[p])]
    for _pass in range(3):  # a restore can make room for one tried before it
        left = []
        for p in todo:
            if _restore_one(reps, p, list(natural[p]), elig, slots, shift, spread):
                restored += 1
            else:
                left.append(p)
        if len(left) == len(todo):
            break
        todo = left
    return restored


def _restore_one(reps, p, nat, elig, slots, shift, spread) -> bool:
    """:func:`restore_orders` for one partition: True when its natural order was put back."""
    cur = reps[p]
    if cur == nat or sorted(cur) != sorted(nat):
        return False
    moves = [(i, cur[s], nat[s]) for i, s in enumerate(slots) if s < len(cur) and cur[s] != nat[s]]
    if any(a in elig and b not in elig for _i, a, b in moves):
        return False
    before = [spread(i) for i in range(len(slots))]
    for i, a, b in moves:
        if a in elig:
            shift(i, a, -1)
        if b in elig:
            shift(i, b, +1)
    if all(spread(i) <= before[i] for i in range(len(slots))):
        reps[p][:] = nat
        return True
    for i, a, b in moves:  # undo
        if b in elig:
            shift(i, b, -1)
        if a in elig:
            shift(i, a, +1)
    return False


def slot_counts(reps: Iterable[Sequence[int]], brokers: Iterable[int], slot: int) -> dict[int, int]:
    """How many partitions each broker holds at replica index ``slot`` (0 = preferred leader)."""
    count = dict.fromkeys(sorted(set(brokers)), 0)
    seen = Counter([r[slot] for r in reps if len(r) > slot])  # (a list: faster to count than a generator)
    for b in count:
        count[b] = seen.get(b, 0)
    return count


def _swap_pass(reps: list[list[int]], scope: Sequence[int], eligible: Collection[int]) -> bool:
    """Swap leader and first follower where that evens first followers without widening the
    leader spread (the staged search cannot: with leaders fixed an RF-2 partition has one choice)."""
    lead = slot_counts(reps, eligible, 0)
    foll = slot_counts(reps, eligible, 1)
    if not lead:
        return False
    lmax, lmin = max(lead.values()), min(lead.values())
    any_change = False
    for _ in range(4):
        changed = False
        for p in scope:
            r = reps[p]
            if len(r) < 2:
                continue
            a, f = r[0], r[1]
            if a not in lead or f not in lead:
                continue
            if foll[f] >= foll[a] + 2 and lead[f] + 1 <= lmax and lead[a] - 1 >= lmin:
                r[0], r[1] = f, a
                lead[f] += 1
                lead[a] -= 1
                foll[f] -= 1
                foll[a] += 1
                changed = True
        if not changed:
            break
        any_change = True
    return any_change


def _put(r: list[int], slot: int, v: int) -> None:
    """Move broker ``v`` to index ``slot``; the others keep their relative order."""
    r.remove(v)
    r.insert(slot, v)


def _balance_slot(reps: list[list[int]], scope: Sequence[int], eligible: Collection[int], slot: int) -> None:
    count = slot_counts(reps, eligible, slot)
    if not count:
        return
    held: dict[int, dict[int, None]] = {b: {} for b in count}
    for p in scope:
        r = reps[p]
        if len(r) > slot:
            h = r[slot]
            if h in held:
                held[h][p] = None
    # 1. holders that may not hold (not eligible): hand over to the least-loaded eligible candidate
    for p in scope:
        r = reps[p]
        if len(r) <= slot or r[slot] in count:
            continue
        cands = [b for b in r[slot:] if b in count]
        if not cands:
            continue
        v = min(cands, key=lambda b: (count[b], b))
        _put(r, slot, v)
        count[v] += 1
        held[v][p] = None
    # 2. augmenting paths from the brokers at the maximum to brokers at <= max - 2
    buckets: dict[int, dict[int, None]] = {}  # count -> brokers not set aside (insertion-ordered)
    for b, c in count.items():
        buckets.setdefault(c, {})[b] = None
    hist = Counter(count.values())  # count -> number of brokers (all eligible)
    top = max(count.values())
    low = min(count.values())
    dead: set[int] = set()
    dead_now: list[int] = []
    fresh = {b: dict(h) for b, h in held.items()}  # held partitions not known to be spent

    def shift(b: int, delta: int) -> None:
        c = count[b]
        del buckets[c][b]
        hist[c] -= 1
        count[b] = c + delta
        buckets.setdefault(c + delta, {})[b] = None
        hist[c + delta] += 1

    while True:
        while top >= low and not buckets.get(top):
            top -= 1
        while hist.get(low, 0) == 0:
            low += 1
        if top - low <= 1:
            return
        sources = list(buckets[top])
        path = _search(reps, held, count, sources, top - 2, slot, dead, dead_now, fresh)
        if path is None:
            # every broker the search reached cannot reach one below top - 2, nor below any lower
            # limit later: what it reaches stays within what it reached, and no later path
            # enters that set (it could not leave it). Set them all aside, never searched again.
            for b in dead_now:
                buckets[count[b]].pop(b, None)
            dead.update(dead_now)
            dead_now.clear()
            continue
        for p, u, v in path:
            _put(reps[p], slot, v)
            del held[u][p]
            held[v][p] = None
            if fresh[u].pop(p, 0) is None:  # (a spent partition stays spent, see _search)
                fresh[v][p] = None
        shift(path[0][1], -1)
        shift(path[-1][2], +1)


def _search(
    reps: list[list[int]],
    held: dict[int, dict[int, None]],
    count: dict[int, int],
    sources: list[int],
    limit: int,
    slot: int,
    dead: set[int] = frozenset(),  # type: ignore[assignment]
    reached: list[int] | None = None,
    fresh: dict[int, dict[int, None]] | None = None,
) -> list[tuple[int, int, int]] | None:
    """Breadth-first: a chain of (partition, from, to) ending at a broker with count <= limit,
    never through a broker of ``dead``; when there is none, ``reached`` gets every broker the
    search reached.

    ``fresh``: per broker, its held partitions except the spent ones -- those none of whose other
    replicas can be a target any more. A broker that is no target now never becomes one (counts
    only fall at the maximum, to max - 1, and the limit only falls), and a partition handed on
    along a path gains as an alternative its old holder, no target either: so the direct
    targets of the sources (the first layer of the search, which decides when one exists) are
    looked for among the fresh partitions only, in held order (the path the search would find).
    A partition found spent leaves ``fresh``."""
    if fresh is not None:
        def direct(u: int) -> tuple[int, int] | None:
            """u's first fresh partition with a target among its other replicas: (partition,
            target); the spent ones it passes leave ``fresh``."""
            mine = fresh[u]
            spent: list[int] = []
            found = None
            for p in mine:
                r = reps[p]
                for i in range(slot, len(r)):
                    v = r[i]
                    if v != u and v in count and v not in dead and count[v] <= limit:
                        found = (p, v)
                        break
                if found:
                    break
                spent.append(p)
            for p in spent:
                del mine[p]
            return found

        for u in sources:  # the first layer, as the search would look at it
            hit = direct(u)
            if hit:
                return [(hit[0], u, hit[1])]
        # none: the second layer, each broker checked as soon as the search would find it (the
        # search looks at them in the order it found them, after finding them all: same path)
        seen: dict[int, tuple[int, int] | None] = {s: None for s in sources}
        for u in sources:
            for p, w in _hops(reps, held, u, slot, count, dead, seen):
                seen[w] = (u, p)
                hit = direct(w)
                if hit:
                    return [(p, u, w), (hit[0], w, hit[1])]
    parent: dict[int, tuple[int, int] | None] = {s: None for s in sources}
    queue = deque(sources)
    while queue:
        u = queue.popleft()
        for p, v in _hops(reps, held, u, slot, count, dead, parent):
            parent[v] = (u, p)
            if count[v] <= limit:
                path: list[tuple[int, int, int]] = []
                node = v
                while parent[node] is not None:
                    pu, pp = parent[node]  # type: ignore[misc]
                    path.append((pp, pu, node))
                    node = pu
                path.reverse()
                return path
            queue.append(v)
    if reached is not None:
        reached.extend(parent)
    return None


def _hops(reps: list[list[int]], held: dict[int, dict[int, None]], u: int, slot: int, count: dict[int, int],
          dead: set[int], seen: Collection[int]):
    """(partition, broker) for each partition ``u`` holds at ``slot`` and each other replica of it
    that may take the slot: eligible, not set aside, not ``seen`` yet (read as it is when yielded:
    the caller adds what it reaches)."""
    for p in held[u]:
        r = reps[p]
        for i in range(slot, len(r)):
            v = r[i]
            if v != u and v not in seen and v in count and v not in dead:
                yield p, v
