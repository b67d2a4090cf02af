"""`cluster describe --sample-seconds`: bytes-in per partition measured on the live sandbox while a
producer writes two topics at very different rates (issue 21 item 1)."""

from __future__ import annotations

import bisect
import json
import os
import threading
import time

import pytest
from confluent_kafka import Producer

from tests.cluster.kafka_helpers import create_topic, delete_topic, kops

pytestmark = pytest.mark.cluster

MSG = 1000  # bytes per message, incompressible, no compression


class Writer(threading.Thread):
    """Writes ``per_s`` messages a second to each topic of ``rates`` ({topic: per_s}) until
    stopped, and notes when each acknowledgement came: ``window_rates`` is what it achieved over
    a window (on a loaded host the producer falls behind its pace and catches up later, so its
    rate over its whole run is not the rate over the window kops sampled)."""

    def __init__(self, bootstrap: str, rates: dict[str, int]):
        super().__init__(daemon=True)
        self.p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                           "compression.type": "none", "enable.idempotence": True})
        self.rates = rates
        self.acked = dict.fromkeys(rates, 0)
        #: per topic, (monotonic time, bytes acknowledged so far) at each acknowledgement
        self.log: dict[str, list[tuple[float, int]]] = {t: [] for t in rates}
        self.stop = threading.Event()
        self.t0 = self.t1 = 0.0

    def _ack(self, err, msg) -> None:
        if err is None:
            self.acked[msg.topic()] += len(msg.value())
            self.log[msg.topic()].append((time.monotonic(), self.acked[msg.topic()]))

    def run(self) -> None:
        value = os.urandom(MSG)
        self.t0 = time.monotonic()
        tick = 0
        while not self.stop.is_set():
            tick += 1
            for topic, per_s in self.rates.items():
                for _ in range(per_s // 20):  # 20 ticks a second
                    self.p.produce(topic, value=value, on_delivery=self._ack)
            self.p.poll(0)
            time.sleep(max(0.0, self.t0 + tick / 20 - time.monotonic()))
        self.p.flush(30)
        self.t1 = time.monotonic()

    def window_rates(self, topic: str, lo: float, hi: float, seconds: float) -> tuple[float, float]:
        """The lowest and the highest rate (acknowledged bytes per second) over any window of
        ``seconds`` between ``lo`` and ``hi``: kops' sample window is one of them."""
        times = [t for t, _ in self.log[topic]]

        def acked_by(t: float) -> int:
            i = bisect.bisect_right(times, t)
            return self.log[topic][i - 1][1] if i else 0

        starts = [lo + k * 0.05 for k in range(int(max(0.0, hi - seconds - lo) / 0.05) + 1)]
        rates = [(acked_by(s + seconds) - acked_by(s)) / seconds for s in starts]
        return min(rates), max(rates)


def test_sampled_rates_follow_what_a_producer_writes(bootstrap, unique_topic):
    hot, cold, idle = unique_topic("hot"), unique_topic("cold"), unique_topic("idle")
    for t in (hot, cold, idle):
        create_topic(bootstrap, t, partitions=3, rf=2, min_isr=1)
    w = Writer(bootstrap, {hot: 400, cold: 40})
    try:
        w.start()
        time.sleep(2)  # the producer at its pace before the window opens
        launched = time.monotonic()
        r = kops("cluster", "describe", "--topic", hot, "--topic", cold, "--topic", idle, "--sample-seconds", "8",
                 "--bootstrap-server", bootstrap, "--output", "json", timeout=120)
        ended = time.monotonic()
        time.sleep(1)
    finally:
        w.stop.set()
        w.join(60)
    try:
        assert r.returncode == 0, r.stderr[-2000:]
        doc = json.loads(r.stdout)
        sample = doc["load_sample"]
        assert 7.5 <= sample["seconds"] <= 12 and sample["unmeasured"] == 0 and sample["partitions"] == 9, sample
        per_topic = {t["name"]: sum(p["bytes_in_per_s"] for p in t["partitions"]) for t in doc["topics"]}
        # on disk a message takes its value plus record and batch headers: a little more than written
        for t in (hot, cold):
            low, high = w.window_rates(t, launched, ended, sample["seconds"])
            assert 0.8 * low <= per_topic[t] <= 1.6 * high, (t, per_topic[t], low, high, ended - launched, sample)
        assert per_topic[idle] == 0.0
        assert per_topic[hot] > 5 * per_topic[cold]
        # each partition of the hot topic takes its share (the producer spreads by sticky batches)
        assert all(p["bytes_in_per_s"] > 0 for t in doc["topics"] if t["name"] == hot for p in t["partitions"])
    finally:
        for t in (hot, cold, idle):
            delete_topic(bootstrap, t)
