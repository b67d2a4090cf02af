"""The engine's recorder (kops.ops.reassign.record): notes, journal events and saves."""

from __future__ import annotations

from kops.ops import journal as J
from kops.ops.reassign.record import Recorder
from kops.ops.throttle import ThrottleState
from tests.unit.engine_fakes import Reporter, Store


def test_a_note_is_said_once_and_journaled_an_event_only_journaled():
    j = J.Journal(id="x", cluster_id="c", moves=[])
    rep = Reporter()
    rec = Recorder(Store(), j, rep, known=["disk check: broker 9 unknown"])
    rec.note("disk check: broker 9 unknown")  # said before the confirmation: not again
    rec.note("wave 2 waits")
    rec.note("wave 2 waits")
    rec.event("throttles: none")
    assert rec.notes == ["disk check: broker 9 unknown", "wave 2 waits"]
    assert rep.messages == ["wave 2 waits"]
    assert [e.split(" ", 1)[1] for e in j.events] == ["disk check: broker 9 unknown", "wave 2 waits",
                                                      "throttles: none"]


def test_the_journal_is_saved_when_asked_and_otherwise_at_most_every_few_seconds():
    j = J.Journal(id="x", cluster_id="c", moves=[])
    store = Store()
    rec = Recorder(store, j)
    rec.save(force=False)  # never saved yet: due
    rec.save(force=False)  # just saved: not due
    assert store.saved == rec.saves == 1
    rec.save()
    records = ThrottleState(brokers={1: {"leader.replication.throttled.rate": {"original": None, "set": "1"}}})
    rec.write_ahead(records)
    assert store.saved == rec.saves == 3 and j.throttles is records
