"""A KRaft upgrade's last step for real: a Kafka 4.4 cluster formatted at metadata.version 3.9
(`sandbox up --release-version 3.9`, as a cluster just rolled from 3.9 is) is taken through the
`upgrade` playbook -- every broker restarted by the hook, leadership moved off and back -- and
its metadata.version raised to 4.4 after the controller validated it; `cluster features`
refuses what cannot be done and changes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.sandboxes import own_sandbox

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def at39(tmp_path_factory, request):
    """KRaft, Kafka 4.4: 1 controller, 3 brokers in racks a, b, c; storage formatted at 3.9."""
    from kops.sandbox import Sandbox

    yield from own_sandbox(Sandbox, tmp_path_factory, request, "kops-upgrade", "upgrade sandbox", brokers=3,
                           racks="a,b,c", mode="kraft", kafka_version="4.4.0", release_version="3.9")


def _kops(sb, *args: str, home=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "KOPS_BOOTSTRAP_SERVER": sb.bootstrap_servers, "KOPS_SANDBOX_DIR": str(sb.workdir),
           **({"KOPS_HOME": str(home)} if home else {})}
    return subprocess.run([sys.executable, "-m", "kops", *args], capture_output=True, text=True, timeout=600,
                          env=env, stdin=subprocess.DEVNULL)


def _metadata_version(sb) -> dict:
    r = _kops(sb, "cluster", "features", "describe", "--output", "json")
    assert r.returncode == 0, r.stderr
    return next(f for f in json.loads(r.stdout)["features"] if f["name"] == "metadata.version")


def test_features_refuse_what_cannot_be_done_and_dry_run_changes_nothing(at39):
    sb = at39
    mv = _metadata_version(sb)
    assert (mv["finalized"], mv["finalized_release"]) == (21, "3.9-IV0"), mv
    assert (mv["supported_max"], mv["supported_max_release"]) == (33, "4.4-IV2"), mv
    for args, why in ((["--release-version", "3.8"], "lower than the finalized 3.9-IV0 (21)"),
                      (["--feature", "nope.version=1"], "the brokers do not support it"),
                      (["--release-version", "9.1"], "not a Kafka release kops knows"),
                      (["--feature", "metadata.version=40"], "the brokers support up to 4.4-IV2 (33)")):
        r = _kops(sb, "cluster", "features", "upgrade", *args)
        assert r.returncode == 2 and why in r.stderr, (args, r.returncode, r.stderr)
    r = _kops(sb, "cluster", "features", "upgrade", "--release-version", "4.0", "--dry-run", "--output", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["dry_run"] and not doc["changed"] and doc["raises"] == [
        {"feature": "metadata.version", "from": 21, "to": 25, "from_release": "3.9-IV0", "to_release": "4.0-IV3"}]
    assert _metadata_version(sb)["finalized"] == 21  # the dry run changed nothing


def test_the_upgrade_playbook_rolls_every_broker_then_raises_metadata_version(at39, tmp_path):
    sb = at39
    admin = AdminClient({"bootstrap.servers": sb.bootstrap_servers})
    admin.create_topics([NewTopic("upgraded", 6, 3)])["upgraded"].result(30)
    pids = {b: sb.nodes.pid(b) for b in sb.broker_ids}
    hook = f"{sys.executable} -m kops sandbox restart --broker {{broker}}"
    r = _kops(sb, "playbook", "run", "upgrade", "-p", "release_version=4.4", "-p", f"upgrade_command={hook}",
              "--yes", "--output", "json", home=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    run = json.loads(r.stdout)
    steps = {s["id"]: s for s in run["steps"]}
    assert [steps[f"each.{b}.upgrade"]["status"] for b in sb.broker_ids] == ["done"] * 3
    assert "would raise metadata.version 3.9-IV0 (21) -> 4.4-IV2 (33)" in steps["validate"]["summary"]
    assert steps["raise"]["summary"].startswith("raised metadata.version 3.9-IV0 (21) -> 4.4-IV2 (33)")
    sb.state.load()  # the hook's processes recorded the new pids
    restarted = {b: sb.nodes.pid(b) for b in sb.broker_ids}
    assert all(restarted[b] != pids[b] for b in pids), (pids, restarted)  # the hook really restarted each
    assert _metadata_version(sb)["finalized"] == 33
    # raising again is nothing to do (a resumed run passes its raise step)
    again = _kops(sb, "cluster", "features", "upgrade", "--release-version", "4.4")
    assert again.returncode == 0 and "nothing to raise: metadata.version is at 4.4-IV2 (33)" in again.stdout, again
    # every partition led by its preferred replica again
    t = admin.list_topics("upgraded", timeout=10).topics["upgraded"]
    assert all(p.leader == p.replicas[0] for p in t.partitions.values()), {k: (p.leader, p.replicas) for k, p in t.partitions.items()}
