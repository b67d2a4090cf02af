"""Pausing kops' own cron jobs for maintenance: one record the whole cluster can see.

``kops rebalance step`` and ``kops leader rebalance`` step aside (exit 0, saying why) while a
pause is active. An operator sets one for a maintenance window (``kops rebalance pause --for 4h
--reason ...``); a playbook run sets one itself while it runs and lifts it when it ends. The
record lives in kops' compacted journal topic ``__kops_journal`` (key ``pause/cron``), so cron
jobs on any host see it, in ZooKeeper and KRaft clusters alike. Every pause has an end
(``until``): a pause nobody lifts — a playbook run killed outright — expires by itself.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from kops.errors import BadInput

PAUSE_KEY = "pause/cron"
#: the longest pause kops accepts (a forgotten pause must not silence the cron jobs for long)
MAX_PAUSE_S = 7 * 24 * 3600.0


@dataclass(frozen=True)
class Pause:
    reason: str
    source: str  # "operator" or "playbook <name> run <id>"
    by: str  # user@host (pid)
    since: str  # ISO-8601 UTC
    until: str  # ISO-8601 UTC

    def active(self, now: datetime | None = None) -> bool:
        now = now or datetime.now(timezone.utc)
        try:
            return datetime.fromisoformat(self.until) > now
        except ValueError:
            return False

    def describe(self) -> str:
        return f"paused by {self.source} ({self.by}) until {self.until}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _store(conn):
    from kops.ops.journal import TopicStore

    return TopicStore(conn)


def _who() -> str:
    from kops.ops.journal import owner_identity

    o = owner_identity()
    return f"{o.get('user', '?')}@{o.get('host', '?')} (pid {o.get('pid', '?')})"


def pause(conn, *, reason: str, duration_s: float, source: str = "operator") -> Pause:
    """Set (or replace) the pause; returns it."""
    if not (0 < duration_s <= MAX_PAUSE_S):
        raise BadInput(f"--for: a pause lasts more than 0 s and at most {MAX_PAUSE_S / 86400:.0f} days "
                       f"(got {duration_s:g} s)")
    now = datetime.now(timezone.utc)
    p = Pause(reason=reason.strip() or "maintenance", source=source, by=_who(),
              since=now.isoformat(timespec="seconds"),
              until=(now + timedelta(seconds=duration_s)).isoformat(timespec="seconds"))
    _store(conn).put_raw(PAUSE_KEY, json.dumps(p.to_dict()).encode())
    return p


def current(conn) -> Pause | None:
    """The active pause, or None (none set, lifted or expired)."""
    try:
        raw = _store(conn).read_all().get(PAUSE_KEY)
    except Exception as e:  # noqa: BLE001 - librdkafka's exceptions, named by the connection
        raise conn.map_error(e, "read kops' pause record (topic __kops_journal)") from None
    if not raw:
        return None
    try:
        p = Pause(**json.loads(raw))
    except (ValueError, TypeError):
        return None  # unreadable: not a pause kops wrote
    return p if p.active() else None


def unpause(conn, *, source: str | None = None) -> Pause | None:
    """Lift the pause; returns the one lifted (None when none was active). ``source`` given
    (a playbook run): only a pause that run set is lifted, never an operator's."""
    p = current(conn)
    if p is None or (source is not None and p.source != source):
        return None
    _store(conn).put_raw(PAUSE_KEY, None)
    return p
