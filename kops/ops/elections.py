"""Leader elections and reorder-only leadership moves against a live cluster.

- :func:`run_elections`: preferred or unclean elections through the Admin API
  (``ElectLeaders``, confluent-kafka), in batches, with a per-partition outcome:
  ``elected``, ``not_needed`` (Kafka's ``ELECTION_NOT_NEEDED``) or ``failed`` with the reason.
- :func:`submit_reorder` / :func:`wait_reordered`: reorder-only reassignments (replica sets
  unchanged, no data moves) used by demote/restore and balance-plan execution. This is the one
  small place to switch over to the reassignment engine (``kops.ops.reassign``) once it offers
  a reorder entry point.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kops.cluster.connection import Connection
from kops.errors import ClusterError, ClusterTimeout
from kops.model import TopicPartition

ELECTED, NOT_NEEDED, FAILED = "elected", "not_needed", "failed"

#: partitions per ElectLeaders request. One request elects them in one pass of the controller
#: (Kafka's own tool sends every partition in one); the bound keeps a request on a cluster of
#: 100,000s of partitions within the client's request timeout (a ZooKeeper-mode controller
#: elects ~3,000-10,000 partitions a second). ``--batch-size`` with ``--batch-wait`` gives gentle steps.
DEFAULT_BATCH_SIZE = 10_000

_ERROR_HINTS = {
    "PREFERRED_LEADER_NOT_AVAILABLE": "the preferred replica is down or not in the ISR",
    "ELIGIBLE_LEADERS_NOT_AVAILABLE": "no live replica can be elected",
    "UNKNOWN_TOPIC_OR_PART": "the partition does not exist",
    "INVALID_TOPIC_EXCEPTION": "the topic is being deleted",
    "CLUSTER_AUTHORIZATION_FAILED": "not authorized to perform leader election",
}


@dataclass(frozen=True)
class Outcome:
    topic: str
    partition: int
    status: str  # elected | not_needed | failed
    reason: str | None = None
    error: str | None = None  # Kafka's error name of a failed election (e.g. PREFERRED_LEADER_NOT_AVAILABLE)

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"topic": self.topic, "partition": self.partition, "status": self.status}
        if self.reason:
            d["reason"] = self.reason
        return d


@dataclass
class ElectionResult:
    election_type: str
    outcomes: list[Outcome] = field(default_factory=list)
    batches: int = 0
    duration_s: float = 0.0
    #: requests sent again and why (no answer in time, the controller moved): a partition the
    #: first request elected answers the second ELECTION_NOT_NEEDED
    resent: list[str] = field(default_factory=list)

    def _with(self, status: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == status]

    @property
    def elected(self) -> list[Outcome]:
        return self._with(ELECTED)

    @property
    def not_needed(self) -> list[Outcome]:
        return self._with(NOT_NEEDED)

    @property
    def failed(self) -> list[Outcome]:
        return self._with(FAILED)

    def counts(self) -> dict[str, int]:
        return {ELECTED: len(self.elected), NOT_NEEDED: len(self.not_needed), FAILED: len(self.failed)}

    def to_dict(self, *, details: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {
            "election_type": self.election_type,
            "batches": self.batches,
            "duration_s": round(self.duration_s, 3),
            "counts": self.counts(),
            "failed": [o.to_dict() for o in self.failed],
        }
        if self.resent:
            d["resent"] = list(self.resent)
        if details:
            d["elected"] = [{"topic": o.topic, "partition": o.partition} for o in self.elected]
            d["not_needed"] = [{"topic": o.topic, "partition": o.partition} for o in self.not_needed]
        return d


def _error_parts(err: Any) -> tuple[str, str]:
    """(name, readable reason) of a per-partition error from confluent-kafka."""
    kerr = err.args[0] if getattr(err, "args", None) else err
    name = kerr.name() if hasattr(kerr, "name") else type(err).__name__
    text = kerr.str() if hasattr(kerr, "str") else str(err)
    hint = _ERROR_HINTS.get(name)
    reason = f"{name}: {text}" if not hint or hint in text else f"{name}: {hint}"
    return name, reason


def _is_not_needed(err: Any) -> bool:
    from confluent_kafka import KafkaError

    kerr = err.args[0] if getattr(err, "args", None) else err
    return getattr(kerr, "code", lambda: None)() == KafkaError.ELECTION_NOT_NEEDED


#: librdkafka answers an ElectLeaders request within its request timeout (socket.timeout.ms,
#: 60 s: confluent-kafka 2.16 cannot pass another, see below), timed out or not; a future still
#: open well past that belongs to a client that lost the request
ELECTION_WAIT_S = 75.0
#: a batch that got no answer is sent again this many times in all, by a new client
ELECTION_ATTEMPTS = 2


def _elect_batch(conn: Connection, etype: Any, batch: list, what: str, resent: list[str]) -> dict:
    """One ElectLeaders request, answered. Electing again is safe — a partition already led by
    the replica asked for answers ELECTION_NOT_NEEDED — so a request that got no answer (the
    controller busy or moving, or librdkafka losing it after a broker restart) is sent once
    more by a new client with fresh metadata; each request sent again is added to ``resent``."""
    from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_fixed

    # no request_timeout/operation_timeout kwargs: confluent-kafka 2.16 rejects them for
    # elect_leaders (SystemError/TypeError); conn.wait bounds the wait instead. The controller
    # elects a batch of 1000 in seconds, but a busy one can take much longer: the connection
    # timeout bounds reaching the cluster, not the controller's work
    wait_s = max(conn.timeout_s, ELECTION_WAIT_S)

    def again(state) -> None:
        conn.renew_admin()
        resent.append(f"{what}: {state.outcome.exception()}; sent again through a new client")

    for attempt in Retrying(retry=retry_if_exception_type(ClusterTimeout), stop=stop_after_attempt(ELECTION_ATTEMPTS),
                            wait=wait_fixed(1.0), before_sleep=again, reraise=True):
        with attempt:
            return conn.to_controller(lambda admin: admin.elect_leaders(etype, batch), what, timeout=wait_s,
                                      on_resend=resent.append)
    raise AssertionError("unreachable")  # pragma: no cover - tenacity either returns or re-raises


def run_elections(
    conn: Connection,
    election_type: str,
    partitions: Sequence[TopicPartition],
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    batch_wait_s: float = 0.0,
    on_batch: Callable[[int, int, ElectionResult], None] | None = None,
    needed: Collection[TopicPartition] = (),
) -> ElectionResult:
    """Elect leaders for ``partitions`` in batches of ``batch_size``, sleeping ``batch_wait_s``
    between batches. A request that fails as a whole (cluster unreachable, not authorized)
    raises :class:`ClusterError` after recording the batches done so far in the exception's
    details; per-partition failures are outcomes, not exceptions.

    ``needed``: the partitions a read made before the first request found not led as asked
    (preferred: not by their preferred replica; unclean: by none). When a batch had to be sent
    again (its first answer lost) and the second request finds one of them ELECTION_NOT_NEEDED,
    the first request elected it: it counts as elected, the reason says so. Without the read a
    partition answered so is ``not_needed`` with a note that the first request may have elected it.
    """
    from confluent_kafka import ElectionType, TopicPartition as CTP

    if election_type not in ("preferred", "unclean"):
        raise ValueError(f"election_type must be preferred or unclean, not {election_type!r}")
    etype = ElectionType.PREFERRED if election_type == "preferred" else ElectionType.UNCLEAN
    result = ElectionResult(election_type)
    t0 = time.monotonic()
    todo = list(partitions)
    size = max(1, int(batch_size))
    nbatches = (len(todo) + size - 1) // size
    for i in range(nbatches):
        if i and batch_wait_s > 0:
            time.sleep(batch_wait_s)
        batch = todo[i * size:(i + 1) * size]
        what = f"{election_type} leader election (batch {i + 1}/{nbatches})"
        resent: list[str] = []
        try:
            answers = _elect_batch(conn, etype, [CTP(t, p) for t, p in batch], what, resent)
        except ClusterError as e:
            result.duration_s = time.monotonic() - t0
            done = result.counts()
            e.details.append(
                f"batches done before the failure: {i}/{nbatches} "
                f"({done[ELECTED]} elected, {done[NOT_NEEDED]} not needed, {done[FAILED]} failed)"
            )
            raise
        result.resent += resent
        by_tp = {(k.topic, k.partition): v for k, v in answers.items()}
        for tp in batch:
            if tp not in by_tp:
                # a partition the controller did not answer for: report, never guess
                result.outcomes.append(Outcome(tp[0], tp[1], FAILED, "no answer from the controller"))
                continue
            err = by_tp[tp]
            if err is None:
                result.outcomes.append(Outcome(tp[0], tp[1], ELECTED))
            elif _is_not_needed(err) and resent and tp in needed:
                result.outcomes.append(Outcome(tp[0], tp[1], ELECTED, "elected by the first request: its answer "
                                               "was lost, the request sent again found it done"))
            elif _is_not_needed(err):
                result.outcomes.append(Outcome(tp[0], tp[1], NOT_NEEDED, "valid replica already elected" + (
                    " (this batch was sent again: its first request may have elected it)" if resent else "")))
            else:
                name, reason = _error_parts(err)
                result.outcomes.append(Outcome(tp[0], tp[1], FAILED, reason, name))
        result.batches += 1
        if on_batch is not None:
            on_batch(i + 1, nbatches, result)
    result.duration_s = time.monotonic() - t0
    return result


# ------------------------------------------------------------------------------------------
# Reorder-only reassignments (no replica-set change, so no data moves)
# ------------------------------------------------------------------------------------------


def submit_reorder(
    conn: Connection, assignment: Mapping[TopicPartition, Sequence[int]], *, chunk_size: int = 500
) -> dict[TopicPartition, str | None]:
    """Submit reorder-only reassignments (KIP-455 AlterPartitionReassignments).

    Returns ``{tp: None}`` for accepted partitions and ``{tp: reason}`` for refused ones. The
    caller must have checked that every replica *set* is unchanged.

    Submitted through the reassignment engine's one Admin API path
    (:func:`kops.ops.reassign.submit`); reorders finish at once (no data moves), so they need
    neither throttles nor a journal.
    """
    if not assignment:
        return {}
    from kops.ops.reassign import submit

    res = submit(conn, {tp: tuple(r) for tp, r in assignment.items()}, chunk_size=chunk_size)
    return {tp: None if err is None else f"reassignment refused: {err}" for tp, err in res.items()}


def wait_reordered(
    conn: Connection,
    assignment: Mapping[TopicPartition, Sequence[int]],
    *,
    timeout_s: float = 60.0,
    poll_s: float = 0.5,
) -> tuple[dict[TopicPartition, str], list[TopicPartition]]:
    """Wait until every partition in ``assignment`` reports exactly that replica order.

    Returns ``(not_done, still_open)``: ``not_done`` maps partitions whose order did not change
    within the timeout to the reason; ``still_open`` lists partitions whose new order is in effect
    but whose reassignment Kafka keeps open because a replica is not in the ISR (it completes by
    itself when that replica catches up; the preferred replica is already the new first one).
    """
    from kops.cluster.topology import ReadOptions, read_topology

    if not assignment:
        return {}, []
    topics = tuple(sorted({t for t, _ in assignment}))
    deadline = time.monotonic() + timeout_s
    ordered_at: float | None = None
    while True:
        topo = read_topology(conn, ReadOptions(with_configs=False, with_sizes=False,
                                               with_reassignments=True, topics=topics))
        parts = {p.tp: p for p in topo.partitions()}
        not_done: dict[TopicPartition, str] = {}
        still_open: list[TopicPartition] = []
        for tp, want in assignment.items():
            p = parts.get(tp)
            if p is None:
                not_done[tp] = "partition disappeared"
            elif tuple(p.replicas) != tuple(want):
                not_done[tp] = f"replica order is still {list(p.replicas)}, want {list(want)}"
            elif p.reassigning:
                still_open.append(tp)
        if (not not_done and not still_open) or time.monotonic() >= deadline:
            return not_done, sorted(still_open)
        if not not_done:
            # the order is in effect everywhere; give open reassignments a short grace only
            ordered_at = ordered_at or time.monotonic()
            if time.monotonic() - ordered_at >= 3.0:
                return not_done, sorted(still_open)
        time.sleep(poll_s)
