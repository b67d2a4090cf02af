"""Python's cyclic garbage collector paused around the placement code's big passes.

A plan builds and rewrites millions of small containers (replica lists, per-broker and per-topic
dicts and sets) none of which is in a reference cycle: reference counting frees each as it goes.
The cyclic collector cannot know that: it runs every few hundred allocations, and every so often
walks every container alive -- millions of them on a 1,000-broker cluster, the more often the more
the plan allocates. That walk finds nothing here and cost ~14 % of a plan's CPU on 300 brokers
(issue 39, docs/benchmarks.md), and about half of Kafka's ``--generate`` emulation's. :func:`paused` turns it off
for the duration and restores it as it was on every exit (so that nested pauses and callers that
keep it off are left alone); whatever cyclic garbage a pass did make is collected at the next run
after. It changes no result. Pure.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused"]


@contextmanager
def paused() -> Iterator[None]:
    """The cyclic garbage collector off while the ``with`` body runs, then as it was."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
