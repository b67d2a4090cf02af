"""Kafka's own replica assignment, reproduced exactly (Kafka 3.9 ``AdminUtils.assignReplicasToBrokers``).

This is what ``kafka-topics.sh --create`` (ZooKeeper mode), ``kafka-reassign-partitions.sh --generate``
and partition expansion compute. kops uses it to show "what Kafka would do" and for
``kops plan assign``; it is *not* kops' own planner (see :mod:`kops.placement` for that).

Two algorithms, chosen as Kafka chooses them:

* **rack-unaware** (no broker has a rack, or ``rack_aware=False``): the first replica of each
  partition goes round-robin over the broker list *in the order given*, starting at ``startIndex``;
  the followers follow at an increasing shift that grows by one every ``len(brokers)`` partitions.
* **rack-aware** (KIP-36; every broker has a rack): the same round-robin over Kafka's
  *rack-alternated* broker list (racks sorted, brokers sorted inside each rack, one broker per rack
  in turn), with the follower shift scaled by the number of racks and a broker skipped when its
  rack (or itself) already holds a replica of the partition while another rack (broker) holds none.
  Here the order of ``brokers`` does not matter.

When ``fixed_start_index < 0`` Kafka draws ``startIndex`` and then ``nextReplicaShift`` uniformly in
``[0, n)``; kops draws them the same way from ``rng`` (a :class:`random.Random`, fresh when ``None``).
With ``fixed_start_index >= 0`` both are set to it and the result is deterministic.

Java ``int`` arithmetic is reproduced too: for start indexes / partition ids so large that Kafka's
32-bit arithmetic overflows, the result is still Kafka's (a slower literal path is used), and where
Kafka itself fails (a negative list index after overflow, a division by zero) a :class:`BadInput`
says so. Errors carry Kafka's own wording and the name of the exception Kafka throws
(:attr:`KafkaAssignmentError.kafka_exception`).

Speed: the common path does a few integer operations per replica; 1,000,000 partitions of RF 3
over 1,000 brokers take a few seconds (``bench/bench_assign.py``).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping, Sequence

from kops.errors import BadInput
from kops.placement.collector import paused

__all__ = [
    "JavaRandom",
    "KafkaAssignmentError",
    "assign_replicas_to_brokers",
    "assign_topics",
    "literal_assign_replicas_to_brokers",
    "rack_alternated_broker_list",
    "replica_index",
]

INT_MIN = -(2**31)
INT_MAX = 2**31 - 1


class KafkaAssignmentError(BadInput):
    """Bad input for Kafka's assignment; ``kafka_exception`` names what Kafka throws for it."""

    def __init__(self, message: str, kafka_exception: str, *, details: list[str] | None = None):
        super().__init__(message, details=details)
        self.kafka_exception = kafka_exception


# -- Java int helpers ---------------------------------------------------------------------------
def _i32(x: int) -> int:
    """Wrap to a Java ``int`` (two's complement, 32 bits)."""
    x &= 0xFFFFFFFF
    return x - 0x100000000 if x & 0x80000000 else x


def _jrem(a: int, b: int) -> int:
    """Java's ``a % b`` (the sign follows the dividend)."""
    if b == 0:
        raise KafkaAssignmentError(
            "Kafka's AdminUtils fails on this input: / by zero", "ArithmeticException"
        )
    r = abs(a) % abs(b)
    return -r if a < 0 else r


class JavaRandom(random.Random):
    """``java.util.Random`` (48-bit LCG): ``randrange(n)`` is Java's ``nextInt(n)``.

    Give it to :func:`assign_replicas_to_brokers` as ``rng`` to reproduce a Kafka run whose
    ``AdminUtils.RAND`` was seeded with the same seed (the differential test does that).
    """

    _MULT = 0x5DEECE66D
    _MASK = (1 << 48) - 1

    def __init__(self, seed: int = 0):
        self._state = 0
        super().__init__(seed)

    def seed(self, a=None, version=2) -> None:  # type: ignore[override]
        super().seed(a, version)
        if isinstance(a, int):
            self._state = (a ^ self._MULT) & self._MASK

    def _next(self, bits: int) -> int:
        self._state = (self._state * self._MULT + 0xB) & self._MASK
        return _i32(self._state >> (48 - bits))

    def next_int(self, bound: int) -> int:
        if bound <= 0:
            raise ValueError("bound must be positive")
        r = self._next(31)
        m = bound - 1
        if bound & m == 0:
            return _i32((bound * r) >> 31)
        u = r
        r = u % bound
        while _i32(u - r + m) < 0:
            u = self._next(31)
            r = u % bound
        return r

    def randrange(self, start, stop=None, step=1):  # type: ignore[override]
        if stop is None and step == 1:
            return self.next_int(start)
        raise NotImplementedError("JavaRandom.randrange supports randrange(n) only")

    def random(self) -> float:  # Java's nextDouble
        return ((self._next(26) << 27) + self._next(27)) * (1.0 / (1 << 53))


def _java_string_key(s: str) -> bytes:
    """Sort key equal to Java's ``String.compareTo`` (UTF-16 code units, not code points)."""
    return s.encode("utf-16-be", "surrogatepass")


def replica_index(first_replica_index: int, second_replica_shift: int, replica_idx: int, n_brokers: int) -> int:
    """Kafka's ``AdminUtils.replicaIndex`` (for in-range, non-overflowing arguments)."""
    shift = 1 + (second_replica_shift + replica_idx) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list[int]:
    """Kafka's ``getRackAlternatedBrokerList``: racks sorted (as Java sorts strings), brokers sorted
    inside each rack, then one broker from each rack in turn until all are listed.

    ``{0: rack1, 1: rack3, 2: rack3, 3: rack2, 4: rack2, 5: rack1}`` -> ``[0, 3, 1, 5, 4, 2]``.
    """
    by_rack: dict[str, list[int]] = {}
    for b, r in broker_racks.items():
        by_rack.setdefault(r, []).append(b)
    racks = sorted(by_rack, key=_java_string_key)
    columns = [sorted(by_rack[r]) for r in racks]
    out: list[int] = []
    depth = max((len(c) for c in columns), default=0)
    for i in range(depth):
        for c in columns:
            if i < len(c):
                out.append(c[i])
    return out


# -- public entry point -----------------------------------------------------------------------------
def assign_replicas_to_brokers(
    brokers: Sequence[tuple[int, str | None]],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    *,
    rack_aware: bool = True,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Kafka 3.9's ``AdminUtils.assignReplicasToBrokers(brokerMetadatas, nPartitions,
    replicationFactor, fixedStartIndex, startPartitionId)``, exactly.

    ``brokers`` are ``(broker id, rack or None)`` in the order Kafka would get them (the order only
    matters rack-unaware). ``rack_aware=False`` drops all racks first (Kafka's
    ``--disable-rack-aware`` / ``RackAwareMode.Disabled``). Returns ``{partition id: [broker ids]}``
    with the preferred leader first, partitions numbered from ``max(0, start_partition_id)``.

    Raises :class:`KafkaAssignmentError` (a :class:`BadInput`) with Kafka's message when Kafka
    would throw.
    """
    return _assign(brokers, n_partitions, replication_factor, fixed_start_index, start_partition_id, rack_aware, rng, False)


def literal_assign_replicas_to_brokers(
    brokers: Sequence[tuple[int, str | None]],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    *,
    rack_aware: bool = True,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """The same result computed statement by statement with Java int semantics (slow; the oracle
    the fast path is tested against)."""
    return _assign(brokers, n_partitions, replication_factor, fixed_start_index, start_partition_id, rack_aware, rng, True)


def assign_topics(
    brokers: Sequence[tuple[int, str | None]],
    topics: Iterable[tuple[int, int]],
    *,
    rack_aware: bool = True,
    rng: random.Random | None = None,
) -> Iterator[dict[int, list[int]]]:
    """:func:`assign_replicas_to_brokers` for each ``(n_partitions, replication_factor)`` of
    ``topics`` in turn (lazily: a topic per result taken), with the same ``brokers`` and the same
    ``rng`` (one fresh ``Random`` for all when ``None``): what ``kafka-reassign-partitions.sh
    --generate`` computes, a call per topic. The same results and the same errors, in the same
    order, as those calls in a loop; the broker list is checked and laid out (Kafka's
    rack-alternated list) once, not once per topic."""
    return _assign_all(brokers, topics, -1, -1, rack_aware, rng, False)


def _assign(
    brokers: Sequence[tuple[int, str | None]],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int,
    start_partition_id: int,
    rack_aware: bool,
    rng: random.Random | None,
    literal: bool,
) -> dict[int, list[int]]:
    return next(_assign_all(brokers, ((n_partitions, replication_factor),), fixed_start_index, start_partition_id,
                            rack_aware, rng, literal))


def _assign_all(
    brokers: Sequence[tuple[int, str | None]],
    topics: Iterable[tuple[int, int]],
    fixed_start_index: int,
    start_partition_id: int,
    rack_aware: bool,
    rng: random.Random | None,
    literal: bool,
) -> Iterator[dict[int, list[int]]]:
    listed: _Brokers | None = None
    for n_partitions, replication_factor in topics:
        for name, value in (
            ("number of partitions", n_partitions),
            ("replication factor", replication_factor),
            ("start index", fixed_start_index),
            ("start partition id", start_partition_id),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or not INT_MIN <= value <= INT_MAX:
                raise KafkaAssignmentError(
                    f"{name} {value!r} is not a 32-bit integer (Kafka takes a Java int)", "IllegalArgumentException"
                )
        if listed is None:  # (the same broker list for every topic: read once, where Kafka reads it)
            listed = _Brokers(brokers, rack_aware)
        listed.check()

        # Kafka's checks, in Kafka's order and wording
        if n_partitions <= 0:
            raise KafkaAssignmentError("Number of partitions must be larger than 0.", "InvalidPartitionsException")
        if replication_factor <= 0:
            raise KafkaAssignmentError(
                "Replication factor must be larger than 0.", "InvalidReplicationFactorException"
            )
        if replication_factor > len(listed.ids):
            raise KafkaAssignmentError(
                f"Replication factor: {replication_factor} larger than available brokers: {len(listed.ids)}.",
                "InvalidReplicationFactorException",
            )
        if rng is None:
            rng = random.Random()
        # Millions of small lists, none of them in a reference cycle: pausing the cyclic garbage
        # collector while they are built halves the time (:mod:`kops.placement.collector`)
        with paused():
            got = _dispatch(listed, n_partitions, replication_factor, fixed_start_index, start_partition_id, rng,
                            literal)
        yield got


class _Brokers:
    """A broker list as Kafka's assignment reads it: the ids and racks (none when rack-unaware),
    the first id that is not a Java int (Kafka's error, raised by :meth:`check` where Kafka
    checks it), the brokers without a rack, and -- rack-aware -- the rack-alternated list with
    each position's rack number (:meth:`layout`, made once when first asked for)."""

    def __init__(self, brokers: Sequence[tuple[int, str | None]], rack_aware: bool):
        self.ids: list[int] = []
        self.racks: list[str | None] = []
        self.bad: tuple[object] | None = None
        for entry in brokers:
            b, r = entry
            if not isinstance(b, int) or isinstance(b, bool) or not INT_MIN <= b <= INT_MAX:
                self.bad = (b,)
                break
            self.ids.append(b)
            self.racks.append(r if rack_aware else None)
        self.unaware = all(r is None for r in self.racks)
        self.missing = [b for b, r in zip(self.ids, self.racks) if r is None]
        self._layout: tuple[list[int], list[int], int] | None = None

    def check(self) -> None:
        if self.bad is not None:
            raise KafkaAssignmentError(f"broker id {self.bad[0]!r} is not a 32-bit integer", "IllegalArgumentException")

    def layout(self) -> tuple[list[int], list[int], int]:
        """Kafka's rack-alternated broker list, the rack number of each of its positions, and the
        number of racks."""
        if self._layout is None:
            rack_map: dict[int, str] = {}
            for b, r in zip(self.ids, self.racks):
                rack_map[b] = r  # type: ignore[assignment]  # a duplicate id keeps its last rack, as Java's HashMap
            arranged = rack_alternated_broker_list(rack_map)
            rack_names = sorted(set(rack_map.values()), key=_java_string_key)
            rack_no = {r: i for i, r in enumerate(rack_names)}
            rack_at = [rack_no[rack_map[b]] for b in arranged]  # rack number of each position
            self._layout = (arranged, rack_at, len(rack_names))
        return self._layout


def _dispatch(
    listed: _Brokers,
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
    literal: bool,
) -> dict[int, list[int]]:
    if listed.unaware:
        return _rack_unaware(n_partitions, replication_factor, listed.ids, fixed_start_index, start_partition_id, rng,
                             literal)
    missing = listed.missing
    if missing:
        raise KafkaAssignmentError(
            "Not all brokers have rack information for replica rack aware assignment.",
            "AdminOperationException",
            details=[
                f"brokers without a rack: {missing}",
                "give every broker a rack, or disable rack awareness (--disable-rack-aware)",
            ],
        )
    arranged, rack_at, m = listed.layout()
    return _rack_aware(n_partitions, replication_factor, arranged, rack_at, m, fixed_start_index, start_partition_id,
                       rng, literal)


def _draws(n: int, fixed_start_index: int, rng: random.Random) -> tuple[int, int]:
    if fixed_start_index >= 0:
        return fixed_start_index, fixed_start_index
    start = rng.randrange(n)
    shift = rng.randrange(n)
    return start, shift


# -- rack-unaware -------------------------------------------------------------------------------
def _rack_unaware(
    n_partitions: int,
    rf: int,
    broker_list: list[int],
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
    literal: bool = False,
) -> dict[int, list[int]]:
    n = len(broker_list)
    start_index, shift = _draws(n, fixed_start_index, rng)
    first_pid = max(0, start_partition_id)
    last_pid = first_pid + n_partitions - 1
    rounds = last_pid // n + 1
    if literal or last_pid + start_index > INT_MAX or shift + rounds + rf > INT_MAX:
        return _rack_unaware_literal(n_partitions, rf, broker_list, start_index, shift, first_pid)
    ret: dict[int, list[int]] = {}
    doubled = broker_list + broker_list
    pid = first_pid
    end = first_pid + n_partitions
    # Kafka bumps the shift at every partition id it assigns that is a positive multiple of n:
    # at the first one if it is such a multiple, then at the start of every later round
    if first_pid > 0 and first_pid % n == 0:
        shift += 1
    while pid < end:
        round_end = min(end, (pid // n + 1) * n)
        if rf == 1:
            for p in range(pid, round_end):
                ret[p] = [broker_list[(p + start_index) % n]]
        else:
            offsets = [1 + (shift + j) % (n - 1) for j in range(rf - 1)]
            if rf == 2:
                o1 = offsets[0]
                for p in range(pid, round_end):
                    f = (p + start_index) % n
                    ret[p] = [doubled[f], doubled[f + o1]]
            elif rf == 3:
                o1, o2 = offsets
                for p in range(pid, round_end):
                    f = (p + start_index) % n
                    ret[p] = [doubled[f], doubled[f + o1], doubled[f + o2]]
            else:
                for p in range(pid, round_end):
                    f = (p + start_index) % n
                    ret[p] = [doubled[f]] + [doubled[f + o] for o in offsets]
        pid = round_end
        shift += 1
    return ret


def _rack_unaware_literal(
    n_partitions: int, rf: int, broker_list: list[int], start_index: int, shift: int, first_pid: int
) -> dict[int, list[int]]:
    """Statement by statement with Java int semantics (only for overflowing inputs)."""
    n = len(broker_list)
    ret: dict[int, list[int]] = {}
    pid = first_pid
    for _ in range(n_partitions):
        if pid > 0 and _jrem(pid, n) == 0:
            shift = _i32(shift + 1)
        first = _jrem(_i32(pid + start_index), n)
        replicas = [_get(broker_list, first)]
        for j in range(rf - 1):
            replicas.append(_get(broker_list, _replica_index_java(first, shift, j, n)))
        ret[pid] = replicas
        pid = _i32(pid + 1)
    return ret


def _replica_index_java(first: int, second_shift: int, idx: int, n: int) -> int:
    shift = 1 + _jrem(_i32(second_shift + idx), n - 1)  # a Java long from here on
    return _jrem(first + shift, n)


def _get(lst: list[int], i: int) -> int:
    if not 0 <= i < len(lst):
        raise KafkaAssignmentError(
            f"Kafka's AdminUtils fails on this input: Index {i} out of bounds for length {len(lst)} "
            "(its 32-bit arithmetic overflows for this start index / start partition id)",
            "IndexOutOfBoundsException",
        )
    return lst[i]


# -- rack-aware (KIP-36) ------------------------------------------------------------------------
def _rack_aware(
    n_partitions: int,
    rf: int,
    arranged: list[int],
    rack_at: list[int],
    m: int,
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
    literal: bool = False,
) -> dict[int, list[int]]:
    """KIP-36 over Kafka's rack-alternated list ``arranged`` (``rack_at``: each position's rack
    number, ``m`` racks; :meth:`_Brokers.layout`)."""
    n = len(arranged)
    start_index, shift = _draws(n, fixed_start_index, rng)
    first_pid = max(0, start_partition_id)
    last_pid = first_pid + n_partitions - 1
    rounds = last_pid // n + 1
    if literal or n < 2 or rf > n or last_pid + start_index > INT_MAX or (shift + rounds) * m + rf * n > INT_MAX:
        return _rack_aware_literal(n_partitions, rf, arranged, rack_at, m, start_index, shift, first_pid)

    ret: dict[int, list[int]] = {}
    doubled = arranged + arranged
    rack2 = rack_at + rack_at
    nm1 = n - 1
    pid = first_pid
    end = first_pid + n_partitions
    if first_pid > 0 and first_pid % n == 0:
        shift += 1
    while pid < end:
        round_end = min(end, (pid // n + 1) * n)
        off = (shift * m) % nm1
        if rf == 1:
            for p in range(pid, round_end):
                ret[p] = [arranged[(p + start_index) % n]]
        elif rf == 2 and m >= 2:
            # the same rule as below, unrolled for the common replication factors
            for p in range(pid, round_end):
                f = (p + start_index) % n
                rl = rack_at[f]
                base = f + 1
                c = off
                while rack2[base + c] == rl:
                    c += 1
                    if c == nm1:
                        c = 0
                ret[p] = [arranged[f], doubled[base + c]]
        elif rf == 3 and m >= 3:
            for p in range(pid, round_end):
                f = (p + start_index) % n
                rl = rack_at[f]
                base = f + 1
                c = off
                r1 = rack2[base + c]
                while r1 == rl:
                    c += 1
                    if c == nm1:
                        c = 0
                    r1 = rack2[base + c]
                b1 = doubled[base + c]
                c += 1
                if c == nm1:
                    c = 0
                r2 = rack2[base + c]
                while r2 == rl or r2 == r1:
                    c += 1
                    if c == nm1:
                        c = 0
                    r2 = rack2[base + c]
                ret[p] = [arranged[f], b1, doubled[base + c]]
        elif rf <= m:
            # every replica goes to a rack not used yet: take the next candidate whose rack is new.
            # Candidate k of a partition whose leader sits at position f is position
            # f + 1 + (off + k) mod (n-1)  (all positions but f, cyclically, from f + 1 + off).
            for p in range(pid, round_end):
                f = (p + start_index) % n
                used = [rack_at[f]]
                replicas = [arranged[f]]
                c = off  # (off + k) mod (n-1)
                base = f + 1
                need = rf - 1
                while need:
                    q = base + c
                    rk = rack2[q]
                    if rk not in used:
                        used.append(rk)
                        replicas.append(doubled[q])
                        need -= 1
                    c += 1
                    if c == nm1:
                        c = 0
                ret[p] = replicas
        else:
            # more replicas than racks: first one per rack, then any broker not used yet
            for p in range(pid, round_end):
                f = (p + start_index) % n
                used_racks = {rack_at[f]}
                used_pos = {f}
                replicas = [arranged[f]]
                c = off
                base = f + 1
                need = rf - 1
                while need:
                    q = base + c
                    rk = rack2[q]
                    if len(used_racks) < m:
                        ok = rk not in used_racks
                    else:
                        ok = (q if q < n else q - n) not in used_pos
                    if ok:
                        used_racks.add(rk)
                        used_pos.add(q if q < n else q - n)
                        replicas.append(doubled[q])
                        need -= 1
                    c += 1
                    if c == nm1:
                        c = 0
                ret[p] = replicas
        pid = round_end
        shift += 1
    return ret


def _rack_aware_literal(
    n_partitions: int,
    rf: int,
    arranged: list[int],
    rack_at: list[int],
    m: int,
    start_index: int,
    shift: int,
    first_pid: int,
) -> dict[int, list[int]]:
    """Statement by statement with Java int semantics (overflow, duplicate ids, tiny clusters)."""
    n = len(arranged)
    ret: dict[int, list[int]] = {}
    pid = first_pid
    for _ in range(n_partitions):
        if pid > 0 and _jrem(pid, n) == 0:
            shift = _i32(shift + 1)
        first = _jrem(_i32(pid + start_index), n)
        leader = _get(arranged, first)
        replicas = [leader]
        racks_with = {rack_at[first]}
        brokers_with = {leader}
        k = 0
        for _j in range(rf - 1):
            while True:
                pos = _replica_index_java(first, _i32(shift * m), k, n)
                broker = _get(arranged, pos)
                rack = rack_at[pos]
                k = _i32(k + 1)
                if (rack not in racks_with or len(racks_with) == m) and (
                    broker not in brokers_with or len(brokers_with) == n
                ):
                    replicas.append(broker)
                    racks_with.add(rack)
                    brokers_with.add(broker)
                    break
        ret[pid] = replicas
        pid = _i32(pid + 1)
    return ret
