"""The one place kops reads and checks what a user gives it.

Every command reads its files, numbers, names, paths and regexes through this package, and every
problem becomes one :class:`~kops.errors.BadInput` (exit 2, nothing changed) that names the
input, the place in it (``file:line:column`` or a JSON path such as ``partitions[3].replicas``)
and the reason — all the problems of an input at once, not the first one only.

- :mod:`kops.inputs.values`: numbers (finite; Kafka's int32 ids and partitions, int64 rates and
  bytes; caps where a value would make kops run for hours), sizes, durations, topic names,
  broker lists, run and execution ids;
- :mod:`kops.inputs.files`: files to read (missing, a directory, unreadable, not UTF-8, invalid
  JSON / YAML with the line) and files or directories to write (a format kops cannot write);
- :mod:`kops.inputs.javaregex`: regexes that Spark runs, checked by Java's rules before Spark
  starts.

Light imports only (stdlib): the CLI imports this at start-up.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from kops.errors import BadInput

F = TypeVar("F", bound=Callable[..., Any])


class Problems:
    """Problems of one input, collected, then raised as one :class:`BadInput`.

    ``source`` names the input (``--reassignment-json-file plan.json``); each problem names the
    place in it and the reason (``partitions[0].replicas: broker 1 is listed twice``)."""

    def __init__(self, source: str):
        self.source = source
        self.items: list[str] = []

    def add(self, where: str, why: str) -> None:
        self.items.append(f"{where}: {why}" if where else why)

    def extend(self, items) -> None:
        self.items.extend(items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def error(self, suffix: str = "nothing was changed") -> BadInput:
        n = len(self.items)
        return BadInput(f"{self.source}: {n} problem{'s' if n != 1 else ''}" + (f"; {suffix}" if suffix else ""),
                        details=list(self.items))

    def raise_if_any(self, suffix: str = "nothing was changed") -> None:
        if self.items:
            raise self.error(suffix)


def guarded(fn: F) -> F:
    """The last line of defence of a parser of user input: an exception its checks did not
    foresee (a TypeError on a shape nobody thought of) is still bad input naming the input
    (``source=``), exit 2 — never a traceback, never "runtime failure"."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (BadInput, KeyboardInterrupt, MemoryError):
            raise
        except Exception as e:  # noqa: BLE001 - that is the point
            source = kwargs.get("source") or "input"
            raise BadInput(f"{source}: cannot be read: {type(e).__name__}: {e} (kops' checks missed this "
                           "case: please report it)") from None

    return wrapper  # type: ignore[return-value]


__all__ = ["BadInput", "Problems", "guarded"]
