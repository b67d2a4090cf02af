"""A sampler of the cluster's metadata for the scenarios that promise no partition offline or
under min ISR (the rolling restart, the ZooKeeper -> KRaft migration)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from tests.cluster.kafka_helpers import admin


class Sampler:
    """Reads the metadata of ``topics`` every ``every_s`` in the background and keeps every
    partition it ever saw offline (no leader) or with fewer than ``min_isr`` in-sync replicas.
    ``samples`` counts the reads that saw the topics, ``max_gap_s`` is the longest time between
    two of them (or from the start to the first, or from the last to the end): a sampler that
    was blind during the restarts cannot vouch for them. :meth:`paused` stops the sampling (and
    the gap's clock) while the test itself, not the code under test, disturbs the cluster."""

    def __init__(self, bootstrap: str, topics: list[str], *, min_isr: int = 2, every_s: float = 0.3,
                 client: dict | None = None):
        self.bootstrap, self.topics, self.min_isr, self.every_s = bootstrap, set(topics), min_isr, every_s
        self.client = client  # more client settings (a secured cluster's), as kafka_helpers.admin
        self.samples = 0
        self.max_gap_s = 0.0
        self._last = time.monotonic()
        self.bad: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()  # held while paused: no read starts, none is counted
        self._thread = threading.Thread(target=self._run, daemon=True, name="metadata-sampler")

    def _run(self) -> None:
        a = admin(self.bootstrap, self.client)
        while not self._stop.is_set():
            with self._lock:
                self._sample(a)
            time.sleep(self.every_s)

    def _sample(self, a) -> None:
        try:
            md = a.list_topics(timeout=5)
        except Exception:  # noqa: BLE001 - a broker restarting: the next sample counts
            return
        seen = False
        for name in self.topics:
            tm = md.topics.get(name)
            if tm is None or tm.error is not None:
                continue
            seen = True
            for p, pm in tm.partitions.items():
                if pm.leader < 0:
                    self.bad.append(f"{name}-{p} offline (replicas {pm.replicas}, isr {pm.isrs})")
                elif len(pm.isrs) < self.min_isr:
                    self.bad.append(f"{name}-{p} under min ISR: isr {pm.isrs} (replicas {pm.replicas})")
        if seen:
            now = time.monotonic()
            self.max_gap_s = max(self.max_gap_s, now - self._last)
            self._last = now
            self.samples += 1

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        with self._lock:
            yield
            self._last = time.monotonic()

    def __enter__(self) -> Sampler:
        self._last = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self.max_gap_s = max(self.max_gap_s, time.monotonic() - self._last)
