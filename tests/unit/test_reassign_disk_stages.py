"""The disk-stage tracker (kops.ops.reassign.disk_stages): the disk check before a later wave,
and a later stage's wait for the space its earlier stages free (DescribeLogDirs stood in; the
times are passed in)."""

from __future__ import annotations

from kops.cluster.topology import LogDirRead
from kops.model import Broker, LogDir, Partition, Topic, Topology
from kops.ops.move import Move
from kops.ops.reassign.disk_stages import DiskStages
from kops.ops.reassign.options import HALT_DISK, SPACE_WAIT_S
from kops.ops.reassign.outcome import Halt
from tests.unit.engine_fakes import Heard

GB = 1_000_000_000


class Disks:
    """DescribeLogDirs: one 100 GB volume per broker, ``usable`` bytes left on broker 3 (80 GB
    elsewhere), and the replicas of ``entries``."""

    def __init__(self, usable, entries=()):
        self.usable, self.entries, self.asked = usable, list(entries), []

    def __call__(self, brokers, topics):
        self.asked.append((list(brokers), sorted(topics)))
        if self.usable is None:
            return None
        return LogDirRead(entries=self.entries, dirs={
            b: (LogDir("/d", 100 * GB, self.usable if b == 3 else 80 * GB),) for b in brokers})


def _in_flight_and_next():
    """t-0 (10 GB) in flight to broker 3, 4 GB of it copied; t-1 (10 GB) next, also to 3."""
    a = Move("t", 0, (1, 2), (1, 3), size_bytes=10 * GB)
    b = Move("t", 1, (1, 2), (1, 3), size_bytes=10 * GB)
    topo = Topology(brokers=tuple(Broker(i) for i in (1, 2, 3, 4)), topics=(Topic("t", (
        Partition("t", 0, (1, 3, 2), isr=(1, 2), leader=1, adding_replicas=(3,), removing_replicas=(2,)),
        Partition("t", 1, (1, 2), isr=(1, 2), leader=1),
    )),))
    entries = [(("t", 0, 1), "/d", 10 * GB, False), (("t", 0, 2), "/d", 10 * GB, False),
               (("t", 0, 3), "/d", 4 * GB, False), (("t", 1, 1), "/d", 10 * GB, False),
               (("t", 1, 2), "/d", 10 * GB, False)]
    return a, b, topo, entries


def test_a_wave_that_no_longer_fits_halts_naming_the_figures():
    a, b, topo, entries = _in_flight_and_next()
    disks = Disks(12 * GB, entries)  # 6 GB still to come for t-0 + 10 GB for t-1 > 12 - 5 GB
    stages, heard = DiskStages(disks, moves=[a, b], reserve_pct=5.0, threshold_pct=80.0), Heard()
    verdict = stages.before_wave(topo, [b], wave_no=2, now=0.0, record=heard)
    assert disks.asked == [([1, 2, 3], ["t"])]  # sources, destinations, and the flights' replicas
    assert isinstance(verdict, Halt) and verdict.by == HALT_DISK
    assert verdict.reasons[0].startswith("broker 3 log dir /d: needs 16000000000 bytes")
    assert verdict.note.startswith("stopped before wave 2: its 1 move(s) would not fit on the disk of broker(s) 3")
    assert "Moves in flight continue" in verdict.note and "resume" in verdict.note
    assert heard.said == []  # the caller says the halt

    disks.usable = 45 * GB  # 16 GB more: 71 % full at the peak, under the 80 % threshold
    assert stages.before_wave(topo, [b], wave_no=2, now=1.0, record=heard) is True
    reserve_only = DiskStages(Disks(17 * GB, entries), moves=[a, b], reserve_pct=0.0, threshold_pct=None)
    assert reserve_only.before_wave(topo, [b], wave_no=2, now=0.0, record=heard) is True  # 16 <= 17 GB


def test_what_cannot_be_checked_is_said_and_never_stops_a_wave():
    a, b, topo, entries = _in_flight_and_next()
    heard = Heard()
    stages = DiskStages(Disks(None), moves=[a, b], reserve_pct=5.0, threshold_pct=80.0)
    assert stages.before_wave(topo, [b], wave_no=2, now=0.0, record=heard) is True
    assert heard.notes == ["disk check skipped before a wave: the brokers' log dirs could not be read "
                           "(DescribeLogDirs)"]
    unsized = Move("u", 0, (1, 2), (1, 4))  # a topic the read does not size
    heard = Heard()
    stages = DiskStages(Disks(12 * GB, entries), moves=[unsized], reserve_pct=5.0, threshold_pct=80.0)
    assert stages.before_wave(topo, [unsized], wave_no=2, now=0.0, record=heard) is True
    assert heard.notes and heard.notes[0].startswith("disk check: broker 4: size of 1 partition it receives unknown")


def test_a_wave_that_copies_nothing_is_not_checked():
    disks = Disks(0)
    reorder = Move("t", 0, (1, 2), (2, 1))
    stages = DiskStages(disks, moves=[reorder], reserve_pct=5.0, threshold_pct=80.0)
    assert stages.before_wave(Topology(brokers=(), topics=()), [reorder], wave_no=1, now=0.0, record=Heard()) is True
    assert disks.asked == []


def _stages():
    """Stage 0 (t-0 off broker 3) has ended, but broker 3 has not deleted the old replica's
    files yet; stage 1 (t-1 onto broker 3, 10 GB) is next, with 25 GB usable (75 GB used: 85 %)."""
    a = Move("t", 0, (3, 1), (2, 1), size_bytes=10 * GB, stage=0)
    b = Move("t", 1, (1, 2), (1, 3), size_bytes=10 * GB, stage=1)
    topo = Topology(brokers=tuple(Broker(i) for i in (1, 2, 3)), topics=(Topic("t", (
        Partition("t", 0, (2, 1), isr=(2, 1), leader=2), Partition("t", 1, (1, 2), isr=(1, 2), leader=1),
    )),))
    disks = Disks(25 * GB, [(("t", 1, 1), "/d", 10 * GB, False), (("t", 1, 2), "/d", 10 * GB, False)])
    return a, b, topo, disks


def test_a_later_stage_waits_for_the_space_its_earlier_stages_free():
    a, b, topo, disks = _stages()
    stages, heard = DiskStages(disks, moves=[a, b], reserve_pct=5.0, threshold_pct=80.0), Heard()
    assert stages.before_wave(topo, [b], wave_no=2, now=1000.0, record=heard) is False
    assert stages.before_wave(topo, [b], wave_no=2, now=1060.0, record=heard) is False
    assert len(heard.notes) == 1 and heard.notes[0].startswith("disk stage 2: waiting for broker(s) 3 to free")
    disks.usable = 35 * GB  # the old replica's files are gone
    assert stages.before_wave(topo, [b], wave_no=2, now=1070.0, record=heard) is True


def test_a_later_stage_halts_when_the_space_does_not_come_back_in_time():
    a, b, topo, disks = _stages()
    stages, heard = DiskStages(disks, moves=[a, b], reserve_pct=5.0, threshold_pct=80.0), Heard()
    assert stages.before_wave(topo, [b], wave_no=2, now=1000.0, record=heard) is False
    assert stages.before_wave(topo, [b], wave_no=2, now=1000.0 + SPACE_WAIT_S - 1, record=heard) is False
    verdict = stages.before_wave(topo, [b], wave_no=2, now=1000.0 + SPACE_WAIT_S, record=heard)
    assert isinstance(verdict, Halt) and verdict.by == HALT_DISK


def test_only_a_broker_that_earlier_stages_leave_is_waited_for():
    """A full broker that no earlier stage moves data off will not free anything: halt at once;
    so does a first-stage wave."""
    a, b, topo, disks = _stages()
    not_leaving = Move("t", 0, (2, 1), (2, 4), size_bytes=10 * GB, stage=0)  # leaves broker 1, not 3
    stages = DiskStages(disks, moves=[not_leaving, b], reserve_pct=5.0, threshold_pct=80.0)
    assert isinstance(stages.before_wave(topo, [b], wave_no=2, now=0.0, record=Heard()), Halt)
    first = Move("t", 1, (1, 2), (1, 3), size_bytes=10 * GB, stage=0)
    stages = DiskStages(disks, moves=[a, first], reserve_pct=5.0, threshold_pct=80.0)
    assert isinstance(stages.before_wave(topo, [first], wave_no=1, now=0.0, record=Heard()), Halt)
