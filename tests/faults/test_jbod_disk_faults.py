"""A JBOD log dir on a disk of its own fails as a disk does (issue 40, item 4): a sandbox of its
own in containers, 3 brokers (ZooKeeper mode, Kafka 3.9.2) with two log dirs each, every log dir
a loop-mounted ext4 of 64 MiB (`--data-disk B:64MB --log-dirs 2`). `fail_log_dir` shuts broker
0's second disk down (every write fails with EIO); asserted: each dir really is a disk of its own
(DescribeLogDirs reports its 64 MiB volume), Kafka takes exactly that dir offline
(KAFKA_STORAGE_ERROR, and `kops cluster describe` names the replicas there offline), the broker
stays registered, the replicas that were in the dir leave their ISR while those in its other
dir stay in; the restore (remount, restart) brings the dir back online and every replica into
its ISR. No workload: not a fault-lab scenario (nothing recorded)."""

from __future__ import annotations

import json
import time

import pytest

from tests.faults.helpers import admin, create_topic, kops, wait_for

pytestmark = pytest.mark.faults

BROKER, DIR = 0, 1
DISK_MB = 64


@pytest.fixture(scope="module")
def jbod_disks(docker_engine, tmp_path_factory, request):
    from tests.faults.conftest import _docker_sandbox

    yield from _docker_sandbox(tmp_path_factory, request, brokers=3, racks="a,b,c", log_dirs=2,
                               kafka_version="3.9.2", data_disk_mb={b: DISK_MB for b in range(3)})


def _isr(bs: str, topic: str) -> dict[int, list[int]]:
    md = admin(bs).list_topics(topic, timeout=10).topics[topic]
    return {p: list(pm.isrs) for p, pm in md.partitions.items()}


def _log_dirs(sb, broker: int, topics: list[str]):
    from kops.cluster.connection import Connection
    from kops.cluster.topology import log_dir_usage

    with Connection(sb.bootstrap_servers, sb.client_config(), timeout_s=10) as conn:
        return log_dir_usage(conn, [broker], topics)


def _described_offline(bs: str, topic: str) -> set[int]:
    r = kops("cluster", "describe", "--bootstrap-server", bs, "--output", "json", timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    return {p["partition"] for t in doc["topics"] if t["name"] == topic for p in t["partitions"]
            if BROKER in p.get("offline_replicas", ())}


def test_a_log_dir_on_its_own_disk_fails_like_a_disk_and_comes_back(jbod_disks):
    from kops.sandbox import disks

    sb = jbod_disks
    bs = sb.bootstrap_servers
    dirs = sb.config.data_dirs(BROKER)
    target = dirs[DIR]
    topic = "jbod-disk"
    create_topic(bs, topic, partitions=8, rf=3, min_isr=2, mb_per_partition=0.2)
    read = _log_dirs(sb, BROKER, [topic])
    # each log dir is a disk of its own: Kafka reports a 64 MiB volume for each
    assert {d.path for d in read.dirs[BROKER]} == {str(d) for d in dirs}
    for d in read.dirs[BROKER]:
        assert d.total_bytes is not None and 0.8 * DISK_MB * 2**20 < d.total_bytes <= DISK_MB * 2**20, d
        assert disks.is_mounted(type(target)(d.path)), d
    where = {key[1]: log_dir for key, log_dir, _size, future in read.entries if not future and key[2] == BROKER}
    in_target = {p for p, d in where.items() if d == str(target)}
    elsewhere = set(where) - in_target
    assert len(where) == 8 and in_target and elsewhere, where  # Kafka spreads new partitions over both dirs

    t0 = time.monotonic()
    failed = sb.faults.fail_log_dir(BROKER, DIR)
    fail_s = time.monotonic() - t0
    assert failed == target and disks.is_shut_down(target)
    with pytest.raises(OSError):  # the disk itself: writes fail (EIO)
        (target / "kops-probe").write_text("x")
    assert sb.faults.offline_log_dirs(BROKER) == [str(target)]  # DescribeLogDirs: KAFKA_STORAGE_ERROR
    assert BROKER in sb.registered_brokers()
    # the replicas in the failed dir are offline (Metadata, as kops reads it) and leave their ISR;
    # those in the broker's other dir stay in theirs
    wait_for(lambda: _described_offline(bs, topic) == in_target, 60, 0.5,
             f"`kops cluster describe` to name broker {BROKER}'s replicas of partitions {sorted(in_target)} offline")
    wait_for(lambda: all(BROKER not in _isr(bs, topic)[p] for p in in_target), 60, 0.3,
             "the replicas in the failed dir out of their ISR")
    isr = _isr(bs, topic)
    assert all(BROKER in isr[p] for p in elsewhere), isr
    assert BROKER in sb.registered_brokers()

    t0 = time.monotonic()
    assert sb.faults.restore_log_dirs(BROKER) == [target]
    restore_s = time.monotonic() - t0
    assert sb.faults.offline_log_dirs(BROKER) == []
    assert disks.is_mounted(target) and not disks.is_shut_down(target)
    wait_for(lambda: all(BROKER in r for r in _isr(bs, topic).values()), 120, 0.5,
             "every replica of broker 0 back in its ISR")
    after = _log_dirs(sb, BROKER, [topic])
    assert {key[1] for key, log_dir, _s, fut in after.entries
            if not fut and key[2] == BROKER and log_dir == str(target)} == in_target  # its data is back
    assert sb.faults.restore_log_dirs(BROKER) == []
    print(f"[jbod disk] offline after {fail_s:.1f} s; restored (remount, restart, every dir online) in "
          f"{restore_s:.1f} s")
