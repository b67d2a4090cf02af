"""The one polling loop (tenacity) and progress reporting.

:func:`poll` calls ``tick()`` every ``interval_s`` until ``done(result)`` or ``timeout_s``;
transient cluster errors (a broker restarting, a controller moving) are retried inside the
same bounded time. Reporters show progress: a rich progress bar when stderr is a terminal,
one line per change (at most every few seconds) otherwise, nothing in quiet mode.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kops.errors import BadInput, ClusterError

T = TypeVar("T")


def poll(
    tick: Callable[[], T],
    done: Callable[[T], bool],
    *,
    interval_s: float = 2.0,
    timeout_s: float | None = None,
    max_errors: int = 10,
    wake: Callable[[], bool] | None = None,
    wake_interval_s: float = 0.25,
) -> tuple[T | None, bool]:
    """Run ``tick`` until ``done``; returns (last result, finished). Never waits past
    ``timeout_s`` (None = until done). ``BadInput`` and non-cluster errors are not retried;
    :class:`ClusterError` is retried ``max_errors`` times in a row.

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

    errors = {"n": 0, "last": None}
    last: dict[str, Any] = {"value": None}
    started = {"t": time.monotonic()}

    def attempt() -> tuple[bool, T | None]:
        started["t"] = time.monotonic()
        try:
            value = tick()
        except BadInput:
            raise
        except ClusterError as e:
            errors["n"] += 1
            errors["last"] = e
            if errors["n"] >= max_errors:
                raise
            return False, last["value"]
        errors["n"] = 0
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


def _human_bytes(n: float | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n}"  # pragma: no cover


class NullReporter:
    def start(self, total: int, bytes_total: int | None) -> None: ...
    def update(self, s: Snapshot) -> None: ...
    def message(self, text: str) -> None: ...
    def stop(self) -> None: ...


class LineReporter(NullReporter):
    """One line on stderr when something changes (or every ``every_s`` seconds)."""

    def __init__(self, stream=None, every_s: float = 10.0):
        self.stream = stream or sys.stderr
        self.every_s = every_s
        self._last: tuple | None = None
        self._last_t = 0.0
        self._t0 = time.monotonic()

    def start(self, total: int, bytes_total: int | None) -> None:
        self._t0 = time.monotonic()

    def update(self, s: Snapshot) -> None:
        key = (s.done, s.in_flight, s.pending, s.note)
        now = time.monotonic()
        if key == self._last and now - self._last_t < self.every_s:
            return
        self._last, self._last_t = key, now
        b = ""
        if s.bytes_total:
            b = f", {_human_bytes(s.bytes_done)}/{_human_bytes(s.bytes_total)}"
        line = (
            f"[{now - self._t0:6.0f}s] {s.done}/{s.total} partitions done, {s.in_flight} moving, "
            f"{s.pending} waiting{b}"
        )
        if s.note:
            line += f" — {s.note}"
        print(line, file=self.stream, flush=True)

    def message(self, text: str) -> None:
        print(text, file=self.stream, flush=True)


class RichReporter(NullReporter):
    """A rich progress bar: partitions done/total, bytes moved, ETA."""

    def __init__(self, console):
        self.console = console
        self.progress = None
        self.task = None
        self.bytes_task = None

    def start(self, total: int, bytes_total: int | None) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[note]}"),
            console=self.console,
            transient=False,
        )
        self.progress.start()
        self.task = self.progress.add_task("partitions", total=total, note="")
        if bytes_total:
            self.bytes_task = self.progress.add_task("bytes", total=bytes_total, note="")

    def update(self, s: Snapshot) -> None:
        if self.progress is None:
            return
        note = f"{s.in_flight} moving, {s.pending} waiting" + (f" — {s.note}" if s.note else "")
        self.progress.update(self.task, completed=s.done, note=note)
        if self.bytes_task is not None and s.bytes_done is not None:
            self.progress.update(self.bytes_task, completed=s.bytes_done, note="")

    def message(self, text: str) -> None:
        if self.progress is not None:
            self.progress.console.print(text, markup=False, highlight=False)
        else:
            self.console.print(text, markup=False, highlight=False)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def make_reporter(*, quiet: bool = False):
    """A reporter for the current stderr: rich on a terminal, lines otherwise."""
    if quiet:
        return NullReporter()
    if sys.stderr.isatty():
        from kops.cli.common import err_console

        return RichReporter(err_console())
    return LineReporter()
