"""A latency probe: one small ``acks=all`` record to the operator's canary topic, timed.

``--throttle auto --probe-topic T`` (:mod:`kops.ops.reassign.auto_throttle`) reads the cluster's
write latency as its clients see it, without a metrics stack: each sample is the time from send
to the acknowledgement of every in-sync replica. The topic is the operator's (a canary topic
with replicas on the brokers that matter); kops never creates it, and a topic that does not
exist is refused before anything starts.
"""

from __future__ import annotations

import time

from kops.cluster.connection import new_producer
from kops.errors import BadInput

#: a sample never waits longer than this: a probe that does not answer is "no sample", and the
#: execution's health check, not the probe, judges a cluster that stopped answering
SAMPLE_TIMEOUT_S = 5.0


class LatencyProbe:
    def __init__(self, conn, topic: str):
        md = conn.metadata(topic, what=f"read metadata of --probe-topic {topic}").topics.get(topic)
        if md is None or md.error is not None or not md.partitions:
            raise BadInput(f"--probe-topic {topic}: no such topic (kops writes its probe records to a topic "
                           "you created for it, e.g. a canary topic with a replica on every broker)")
        self.topic = topic
        self.partitions = sorted(md.partitions)
        self._next = 0
        self._producer = new_producer(conn, acks="all", linger_ms=0,
                                       message_timeout_ms=int(SAMPLE_TIMEOUT_S * 1000))

    def sample(self) -> float | None:
        """One record's round trip in milliseconds, to the partitions in turn; None when it was
        not acknowledged within :data:`SAMPLE_TIMEOUT_S`."""
        partition = self.partitions[self._next % len(self.partitions)]
        self._next += 1
        result: list[float | None] = []

        def delivered(err, _msg) -> None:
            result.append(None if err is not None else (time.monotonic() - sent) * 1000)

        sent = time.monotonic()
        try:
            self._producer.produce(self.topic, value=b"kops-probe", key=b"kops-probe", partition=partition,
                                   on_delivery=delivered)
        except BufferError:  # earlier records still unanswered: this one is not a sample either
            return None
        deadline = sent + SAMPLE_TIMEOUT_S + 1
        while not result and time.monotonic() < deadline:
            self._producer.poll(0.05)
        return result[0] if result else None

    def close(self) -> None:
        self._producer.flush(1)
