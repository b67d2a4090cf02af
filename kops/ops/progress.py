"""The one polling loop (tenacity) and progress reporting.

:func:`poll` calls ``tick()`` every ``interval_s`` until ``done(result)`` or ``timeout_s``;
transient cluster errors (a broker restarting, a controller moving) are retried inside the
same bounded time. Operations report progress (:class:`Snapshot`) to a reporter: the interface is
:class:`NullReporter`; the CLI's reporters (:mod:`kops.cli.progress`) draw it for people.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kops.errors import BadInput, ClusterError

T = TypeVar("T")

#: a wait ends on cluster errors only once they have lasted this long in a row (as well as
#: ``max_errors`` ticks): a ZooKeeper-mode controller that dies leaves the cluster without one
#: until its ZooKeeper session expires (``zookeeper.session.timeout.ms``, 18 s by default) and a
#: successor has loaded the cluster's state -- controller-bound reads (ListPartitionReassignments)
#: fail all that time, at any poll interval
ERROR_GRACE_S = 45.0

def poll(
    tick: Callable[[], T],
    done: Callable[[T], bool],
    *,
    interval_s: float = 2.0,
    timeout_s: float | None = None,
    max_errors: int = 10,
    error_grace_s: float = ERROR_GRACE_S,
    wake: Callable[[], bool] | None = None,
    wake_interval_s: float = 0.25,
) -> tuple[T | None, bool]:
    """Run ``tick`` until ``done``; returns (last result, finished). Never waits past
    ``timeout_s`` (None = until done). ``BadInput`` and non-cluster errors are not retried;
    :class:`ClusterError` is retried until it has been raised ``max_errors`` times in a row and
    for ``error_grace_s`` (:data:`ERROR_GRACE_S`) since the first of them.

    Ticks *start* every ``interval_s``: a tick's own duration counts toward the interval, so a
    slow cluster does not stretch the period. Between ticks ``wake()`` — a cheap check, e.g.
    "has one of the reassignments in flight finished?" — is called every ``wake_interval_s``;
    when it returns True the next tick runs at once instead of at the end of the interval
    (errors in ``wake`` only mean "not yet")."""
    from tenacity import (
        RetryError,
        Retrying,
        retry_if_result,
        stop_after_delay,
        stop_never,
    )

    errors: dict[str, Any] = {"n": 0, "since": None}
    last: dict[str, Any] = {"value": None}
    started = {"t": time.monotonic()}

    def attempt() -> tuple[bool, T | None]:
        started["t"] = time.monotonic()
        try:
            value = tick()
        except BadInput:
            raise
        except ClusterError:
            errors["n"] += 1
            if errors["since"] is None:
                errors["since"] = started["t"]
            if errors["n"] >= max_errors and time.monotonic() - errors["since"] >= error_grace_s:
                raise
            return False, last["value"]
        errors["n"], errors["since"] = 0, None
        last["value"] = value
        return done(value), value

    def until_next(_state) -> float:  # fixed rate: the tick's duration is part of the interval
        return max(0.0, interval_s - (time.monotonic() - started["t"]))

    def sleep(seconds: float) -> None:
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            if wake is None:
                time.sleep(left)
                return
            time.sleep(min(left, wake_interval_s))
            try:
                if wake():
                    return
            except Exception:  # noqa: BLE001 - a failed cheap check is "not yet"; the tick reports errors
                pass

    stop = stop_after_delay(timeout_s) if timeout_s is not None else stop_never
    retrying = Retrying(
        retry=retry_if_result(lambda r: not r[0]),  # exceptions end the loop (reraised)
        stop=stop,
        wait=until_next,
        sleep=sleep,
        reraise=True,
    )
    try:
        finished, value = retrying(attempt)
    except RetryError as e:  # stopped by the timeout
        finished, value = e.last_attempt.result()
    return value, finished


def poll_while_progressing(
    tick: Callable[[], T],
    left: Callable[[T], int],
    *,
    timeout_s: float,
    quiet_s: float = 10.0,
    interval_s: float = 0.5,
) -> T:
    """Run ``tick`` until ``left(result)`` is 0, ``quiet_s`` pass without it falling, or
    ``timeout_s`` in all; return the last result. For metadata that lags the controller: after
    thousands of reassignments or elections the broker that answers shows them seconds to tens
    of seconds late, in order, so kops waits as long as it sees them arrive, not a fixed time."""
    best: dict[str, Any] = {"n": None, "at": time.monotonic()}

    def done(value: T) -> bool:
        n, now = left(value), time.monotonic()
        if best["n"] is None or n < best["n"]:
            best["n"], best["at"] = n, now
        return n == 0 or now - best["at"] >= quiet_s

    # max_errors=1: a read that fails ends the wait with its error, as a single read would
    value, _ = poll(tick, done, interval_s=interval_s, timeout_s=timeout_s, max_errors=1, error_grace_s=0)
    return value  # type: ignore[return-value]


# ------------------------------------------------------------------------------------------
# reporters
# ------------------------------------------------------------------------------------------


@dataclass
class Snapshot:
    done: int
    total: int
    in_flight: int
    pending: int
    bytes_done: int | None = None
    bytes_total: int | None = None
    note: str = ""
    #: the replication throttle in force, bytes/s (None: none)
    throttle: int | None = None


class RecentRate:
    """Bytes per second over the last ``window_s`` seconds, from (time, bytes done) samples:
    what the copy runs at now, not its average since the start (a wave waiting on a stalled
    broker shows as a falling rate)."""

    def __init__(self, window_s: float = 30.0):
        self.window_s = window_s
        self._samples: deque[tuple[float, int]] = deque()

    def add(self, t: float, done: int) -> float | None:
        """Record ``done`` bytes at time ``t``; the rate since the last sample at or before
        ``t - window_s`` (the first sample while the window is not yet full). None until two
        samples are apart in time."""
        samples = self._samples
        samples.append((t, done))
        while len(samples) > 2 and samples[1][0] <= t - self.window_s:
            samples.popleft()
        t0, done0 = samples[0]
        return None if t <= t0 else max(0.0, (done - done0) / (t - t0))


class NullReporter:
    """What an operation reports progress to (the interface; this one shows nothing). The CLI
    implements it for people (:mod:`kops.cli.progress`); code that runs unattended passes none."""

    def start(self, total: int, bytes_total: int | None) -> None: ...
    def update(self, s: Snapshot) -> None: ...
    def message(self, text: str) -> None: ...
    def stop(self) -> None: ...
