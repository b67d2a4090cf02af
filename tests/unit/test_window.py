"""Maintenance windows (``--window``, kops.inputs.window) and the cron jobs stepping aside outside them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kops.inputs.window import InvalidWindow, parse

UTC = timezone.utc
PARIS = ZoneInfo("Europe/Paris")


def at(y, mo, d, h=0, mi=0, tz=UTC) -> datetime:
    return datetime(y, mo, d, h, mi, tzinfo=tz)


def utc(t: datetime | None) -> datetime | None:
    """Compared in UTC: a time in the hour repeated when summer time ends compares unequal to
    any time of another zone (PEP 495)."""
    return None if t is None else t.astimezone(UTC)


def test_a_weekday_window_in_its_zone():
    w = parse("Mon-Fri 01:00-06:00 Europe/Paris")
    # Monday 2026-11-30, Paris is UTC+1 in winter
    assert w.open_at(at(2026, 11, 30, 0, 0)) == at(2026, 11, 30, 6, 0, PARIS)  # 01:00 Paris
    assert w.open_at(at(2026, 11, 29, 23, 59)) is None  # 00:59 Paris
    assert w.open_at(at(2026, 11, 30, 5, 0)) is None  # 06:00 Paris: closed (end excluded)
    # Saturday: the next opens on Monday
    reason = w.closed_reason(at(2026, 11, 28, 12, 0))
    assert reason.startswith("outside the maintenance window (Mon-Fri 01:00-06:00 Europe/Paris)")
    assert "Mon 2026-11-30 01:00 CET" in reason and "(in 1 d 12 h 0 min)" in reason
    assert w.closed_reason(at(2026, 11, 30, 1, 0)) is None


def test_a_window_past_midnight_closes_the_next_day_and_day_ranges_wrap():
    w = parse("Fri 22:00-02:00 UTC")
    assert w.open_at(at(2026, 11, 28, 1, 59)) == at(2026, 11, 28, 2, 0)  # Saturday night, opened Friday
    assert w.open_at(at(2026, 11, 28, 22, 0)) is None  # Saturday evening: not a window day
    wrap = parse("Fri-Mon 00:00-24:00 UTC")
    assert [wrap.open_at(at(2026, 11, 23 + i, 12)) is not None for i in range(7)] == [
        True, False, False, False, True, True, True]  # Mon..Sun
    assert parse("daily 00:00-24:00 UTC").closed_reason(at(2026, 1, 1, 3)) is None
    several = parse("Sat,Sun 10:00-12:00 UTC; Wed 03:00-04:00 America/New_York")
    assert several.next_open(at(2026, 11, 28, 12, 0)) == at(2026, 11, 29, 10, 0)
    assert several.next_open(at(2026, 11, 29, 12, 0)) == at(2026, 12, 2, 3, 0, ZoneInfo("America/New_York"))


def test_summer_time_changes():
    w = parse("Sun 02:30-04:00 Europe/Paris")
    # 2026-03-29: 02:00 -> 03:00 in Paris; 02:30 does not exist, the window opens an hour later
    assert utc(w.next_open(at(2026, 3, 28))) == at(2026, 3, 29, 1, 30)  # 03:30 CEST
    assert w.open_at(at(2026, 3, 29, 1, 45)) is not None
    # 2026-10-25: 03:00 -> 02:00; the first 02:30 counts, the window closes at 04:00 CET
    assert utc(w.next_open(at(2026, 10, 24))) == at(2026, 10, 25, 0, 30)
    assert utc(w.open_at(at(2026, 10, 25, 2, 59))) == at(2026, 10, 25, 3, 0)


@pytest.mark.parametrize("text, why", [
    ("Mon-Fri 01:00-06:00", "the time zone is required"),
    ("Mon-Fry 01:00-06:00 UTC", "'Fry' is not a day"),
    ("Mon 25:00-06:00 UTC", "25:00 is not a time of day"),
    ("Mon 24:00-06:00 UTC", "24:00 is not a time of day"),
    ("Mon 01:60-06:00 UTC", "01:60 is not a time of day"),
    ("Mon 01:00-01:00 UTC", "opens and closes at the same time"),
    ("Mon 01:00-06:00 Mars/Olympus", "'Mars/Olympus' is not a time zone"),
    ("", "no window given"),
    (" ; ", "no window given"),
])
def test_bad_windows_are_named(text, why):
    with pytest.raises(InvalidWindow, match=why.replace("(", r"\(")):
        parse(text)


WINDOWS = st.sampled_from(["Mon-Fri 01:00-06:00 Europe/Paris", "Fri 22:00-02:00 UTC", "Sat,Sun 00:00-24:00 Asia/Kolkata",
                           "Sun 02:30-04:00 Europe/Paris; Wed 23:00-00:30 America/New_York", "daily 12:00-12:01 UTC"])


@settings(max_examples=300, deadline=None)
@given(WINDOWS, st.datetimes(min_value=datetime(2025, 1, 1), max_value=datetime(2028, 12, 31)))
def test_open_and_next_agree(text, naive):
    w, now = parse(text), naive.replace(tzinfo=UTC)
    closes = w.open_at(now)
    if closes is not None:
        assert closes > now and w.closed_reason(now) is None
    else:
        nxt = w.next_open(now)
        assert now < nxt <= now + timedelta(days=8)
        assert w.open_at(nxt) is not None  # open at its opening...
        assert w.open_at(nxt - timedelta(minutes=1)) is None or nxt - timedelta(minutes=1) <= now  # ...not before


class _Untouchable:
    """A connection that fails the test if anything of it is used."""

    def __getattr__(self, name):
        raise AssertionError(f"the cluster was touched ({name}) outside the window")


def test_rebalance_step_and_leader_rebalance_step_aside_outside_the_window_without_reading_the_cluster(tmp_path):
    from kops.ops import leader_rebalance, replica_rebalance

    w = parse("Mon-Fri 01:00-06:00 UTC")
    saturday = at(2026, 11, 28, 12)
    res = replica_rebalance.step(_Untouchable(), bounds=replica_rebalance.StepBounds(max_moves=5), throttle=10_000_000,
                                 window=w, now=saturday)
    assert res.status == replica_rebalance.STEPPED_ASIDE and res.exit_code == 0
    assert "outside the maintenance window" in res.summary() and "Mon 2026-11-30 01:00" in res.summary()
    metrics = tmp_path / "leader.prom"
    lr = leader_rebalance.rebalance(_Untouchable(), window=w, now=saturday, metrics_file=str(metrics))
    assert lr.status == leader_rebalance.STEPPED_ASIDE and lr.exit_code == 0 and "next opens" in lr.summary()
    assert "kops_leader_rebalance_stepped_aside 1" in metrics.read_text()
