"""Crash points for fault-injection tests: ``KOPS_FAILPOINT=<name>`` makes the kops process kill
itself (SIGKILL, like ``kill -9``: no cleanup, no flush) when it reaches that point.

The cluster tests use them to kill kops at the exact moments that matter for recovery (after
taking the lock but before journaling, after applying throttles but before journaling them,
after submitting a wave but before recording it), instead of hoping a timed ``kill -9`` lands
there. Unset (always, outside tests), :func:`reach` is a dictionary lookup.

Names: ``lock.topic-created``, ``execute.lock-taken``, ``throttles.applied``, ``wave.submitted``.

``KOPS_HOLDPOINT=<name>`` with ``KOPS_HOLDPOINT_RELEASE=<file>`` holds the process at that point
instead, until the file exists (at most :data:`HOLD_MAX_S`): a test runs a second kops while the
first is known to be there (two cron runs at once), then lets the first go on.
"""

from __future__ import annotations

import os
import signal
import time

ENV = "KOPS_FAILPOINT"
HOLD_ENV, RELEASE_ENV = "KOPS_HOLDPOINT", "KOPS_HOLDPOINT_RELEASE"
#: a held kops goes on by itself after this long (a test that forgot it never hangs it)
HOLD_MAX_S = 600.0


def reach(name: str) -> None:
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get(HOLD_ENV) == name and os.environ.get(RELEASE_ENV):
        _hold(os.environ[RELEASE_ENV])


def _hold(release: str) -> None:
    deadline = time.monotonic() + HOLD_MAX_S
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.1)
