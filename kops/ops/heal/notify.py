"""``heal step --notify-command CMD``: a hook run once per anomaly that is new, changed state or
ended in this run, with the anomaly as one JSON document on its stdin (an alerting script).

A hook that fails -- not found, a non-zero exit, no end within :data:`TIMEOUT_S` -- is reported
in the run's notes and never blocks anything: it runs after the run's fix and memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
from collections.abc import Iterable, Mapping
from typing import Any

from kops.ops.heal.anomalies import Anomaly

#: how long one call of the hook may take
TIMEOUT_S = 30.0


def events(before: Mapping[str, Anomaly], after: Iterable[Anomaly], now: float) -> list[dict[str, Any]]:
    """The anomalies to tell about (pure): each one new (not remembered, or remembered as ended),
    whose state changed, or that ended this run; as JSON-ready documents with ``event``
    (``new``, ``changed``, ``ended``) and ``previous_state``."""
    out = []
    for a in after:
        was = before.get(a.key)
        if was is None or (not was.active and a.active):
            kind, prev = "new", None
        elif was.state != a.state:
            kind, prev = ("ended" if not a.active else "changed"), was.state
        else:
            continue
        out.append({"event": kind, "previous_state": prev, **a.to_dict(now)})
    return out


def notify(command: str, docs: Iterable[Mapping[str, Any]], *, timeout_s: float = TIMEOUT_S) -> list[str]:
    """Run ``command`` (a shell command line) once per document; what failed, one line each."""
    problems = []
    for doc in docs:
        what = f"--notify-command for {doc.get('key')} ({doc.get('event')})"
        try:
            # a session of its own: a hook that hangs is killed with everything it started
            proc = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True)
        except OSError as e:
            problems.append(f"{what}: cannot run {shlex.quote(command)} ({e.strerror or e})")
            continue
        try:
            out, err = proc.communicate(json.dumps(doc), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            problems.append(f"{what}: no end within {timeout_s:g} s (killed)")
            continue
        if proc.returncode != 0:
            tail = (err or out).strip().splitlines()[-1:] or [""]
            problems.append(f"{what}: exit {proc.returncode}{': ' + tail[0][:200] if tail[0] else ''}")
    return problems
