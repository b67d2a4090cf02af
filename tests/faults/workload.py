"""The traffic every fault scenario runs under: an idempotent ``acks=all`` producer and a consumer,
on topics with RF 3 over 3 racks and ``min.insync.replicas=2``, from start to end of the scenario.

Every message carries a unique id. The producer records each one the cluster acknowledged
(delivery report without error); the consumer records every id it reads. At the end the
producer stops, and the consumer is given time to catch up (waiting on the condition: every
acknowledged id read, or no progress for a while): ``lost`` is the acknowledged ids never read.
Messages that were never acknowledged (timed out during a fault) are not counted as lost: the
producer told its caller they failed, as Kafka promises.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, Producer


@dataclass
class WorkloadResult:
    sent: int
    acknowledged: int
    failed: int
    read: int
    lost: int
    lost_examples: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"sent": self.sent, "acknowledged": self.acknowledged, "failed": self.failed, "read": self.read,
                "lost": self.lost}


class Workload:
    """``with Workload(bootstrap, topics) as w: ...; result = w.result`` (or ``start`` / ``finish``)."""

    def __init__(self, bootstrap: str, topics: list[str], *, rate_per_s: float = 200.0, value_bytes: int = 200):
        self.bootstrap = bootstrap
        self.topics = topics
        self.interval = 1.0 / rate_per_s
        self.value = b"x" * value_bytes
        self.run_id = uuid.uuid4().hex[:8]
        self._acked: set[str] = set()
        self._failed: set[str] = set()
        self._read: set[str] = set()
        self._sent = 0
        self._errors: list[str] = []
        self._lock = threading.Lock()
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._threads: list[threading.Thread] = []
        self.result: WorkloadResult | None = None

    # -- producer -------------------------------------------------------------------------------
    def _produce(self) -> None:
        p = Producer({
            "bootstrap.servers": self.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 120_000,
            "request.timeout.ms": 15_000,
        })

        def report(err, msg):
            key = msg.key().decode()
            with self._lock:
                if err is None:
                    self._acked.add(key)
                else:
                    self._failed.add(key)
                    if len(self._errors) < 20:
                        self._errors.append(f"produce {key}: {err}")

        i = 0
        next_t = time.monotonic()
        while not self._stop_producing.is_set():
            key = f"{self.run_id}-{i}"
            topic = self.topics[i % len(self.topics)]
            try:
                p.produce(topic, key=key.encode(), value=self.value, on_delivery=report)
                i += 1
                with self._lock:
                    self._sent = i
            except BufferError:
                p.poll(0.1)
                continue
            p.poll(0)
            next_t += self.interval
            delay = next_t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_t = time.monotonic()
        left = p.flush(150)
        if left:
            with self._lock:
                self._errors.append(f"{left} messages still unacknowledged when the producer closed")

    # -- consumer -------------------------------------------------------------------------------
    def _consume(self) -> None:
        c = Consumer({
            "bootstrap.servers": self.bootstrap,
            "group.id": f"kops-faults-{self.run_id}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
            # a subscribed topic a broker did not know yet is looked up again soon (default 5 min)
            "topic.metadata.refresh.interval.ms": 3000,
        })
        c.subscribe(self.topics)
        try:
            while not self._stop_consuming.is_set():
                for msg in c.consume(500, timeout=0.5):
                    if msg.error():
                        if msg.error().code() != KafkaError._PARTITION_EOF:
                            with self._lock:
                                if len(self._errors) < 20:
                                    self._errors.append(f"consume: {msg.error()}")
                        continue
                    k = msg.key()
                    if k is not None:
                        with self._lock:
                            self._read.add(k.decode())
        finally:
            c.close()

    # -- control --------------------------------------------------------------------------------
    def start(self) -> Workload:
        for target in (self._consume, self._produce):
            t = threading.Thread(target=target, daemon=True, name=f"workload-{target.__name__}")
            t.start()
            self._threads.append(t)
        return self

    def acknowledged(self) -> int:
        with self._lock:
            return len(self._acked)

    def wait_acknowledged(self, n: int, timeout: float = 60) -> None:
        """Wait until at least ``n`` more messages than now are acknowledged (traffic flows)."""
        target = self.acknowledged() + n
        deadline = time.monotonic() + timeout
        while self.acknowledged() < target:
            if time.monotonic() > deadline:
                raise AssertionError(f"the workload's producer got no {n} acknowledgements in {timeout:.0f}s: "
                                     f"{self._errors[-3:]}")
            time.sleep(0.2)

    def finish(self, catch_up_s: float = 120.0) -> WorkloadResult:
        """Stop producing; let the consumer read until it has every acknowledged message (or makes
        no progress for ``catch_up_s``); count."""
        self._stop_producing.set()
        self._threads[1].join(180)
        deadline = time.monotonic() + catch_up_s
        last = -1
        while time.monotonic() < deadline:
            with self._lock:
                missing = len(self._acked - self._read)
                read = len(self._read)
            if missing == 0:
                break
            if read != last:
                last = read
                deadline = max(deadline, time.monotonic() + 30)
            time.sleep(0.3)
        self._stop_consuming.set()
        self._threads[0].join(30)
        with self._lock:
            lost = sorted(self._acked - self._read)
            self.result = WorkloadResult(
                sent=self._sent, acknowledged=len(self._acked), failed=len(self._failed - self._acked),
                read=len(self._read), lost=len(lost), lost_examples=lost[:10], errors=list(self._errors),
            )
        return self.result

    def __enter__(self) -> Workload:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.result is None:
            self.finish()
