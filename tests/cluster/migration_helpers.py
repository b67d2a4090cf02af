"""What the ZooKeeper -> KRaft migration tests share (tests/cluster/test_zk_to_kraft_playbook.py,
plain; tests/cluster/test_zk_to_kraft_secured.py, SASL/SCRAM and ACLs): the layout and the
sandbox's CLI as a test reads them, the playbook run that mends Kafka 3.9.2's stuck ISR and
resumes, the row of docs/reliability.md and the sampler's verdict."""

from __future__ import annotations

import json
import subprocess
import time

from tests.cluster.kafka_helpers import Producing, admin, kops, wait_for
from tests.sampling import Sampler


def layout(bs: str, client: dict | None = None) -> dict[str, dict[int, list[int]]]:
    """Every topic's replica assignment (``client``: a secured cluster's settings)."""
    md = admin(bs, client).list_topics(timeout=10)
    return {t: {p: list(pm.replicas) for p, pm in tm.partitions.items()} for t, tm in md.topics.items()}


def sandbox_cli(sb, *args: str) -> dict:
    """``kops sandbox ARGS --workdir <sb> --output json``, which must succeed."""
    r = kops("sandbox", *args, "--workdir", str(sb.workdir), "--output", "json")
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return json.loads(r.stdout)


def stuck_leaders(r: subprocess.CompletedProcess, loop: str) -> tuple[str, list[int], str]:
    """A run stopped by Kafka 3.9.2's stuck ISR (below): the failed step (the in_sync gate after a
    broker of ``loop`` came back), the leaders it names, and the run's id."""
    assert r.stdout.strip(), r.stderr[-4000:]
    rep = json.loads(r.stdout)
    failed = [s for s in rep["steps"] if s["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["id"].startswith(loop) and failed[0]["id"].endswith(".back"), \
        (failed, r.stderr[-4000:])
    err = failed[0]["error"]
    assert "out of ISR (of partitions led by brokers [" in err, err
    return failed[0]["id"], json.loads(err.split("led by brokers ")[1].split(")")[0]), rep["run_id"]


def mend_stuck_isr(r: subprocess.CompletedProcess, loop: str, hook: str, sampler: Sampler) -> tuple[str, list[int], str]:
    """Kafka 3.9.2 (1 run in 3 here): a broker that switches controllers during the migration
    (the ZooKeeper controller when the KRaft controller takes over, or, in a rollback, a broker
    still in migration mode once the KRaft controllers are gone) stops sending working
    AlterPartition requests (to itself, or to the removed KRaft controller), so the partitions it
    leads never take the broker just restarted back into their ISR. The in_sync gate stops the run
    there and names that leader; the operator restarts it with the same hook and resumes
    (docs/kraft-migration.md) -- as this does, the sampler paused (the test's own restarts, not
    the playbook's). A restart moves the leaderships it held to the other replicas: where one of
    those is stuck the same way, the ISR stays short under it, and the gate of the resumed run
    would name it; here it is restarted with the same hook before resuming (at most every broker
    once). Returns :func:`stuck_leaders` of the run, with every leader the test restarted."""
    step, leaders, run_id = stuck_leaders(r, loop)
    restarted: list[int] = []
    with sampler.paused():
        while leaders:
            for b in leaders:
                h = subprocess.run(hook.replace("{broker}", str(b)), shell=True, capture_output=True, text=True,
                                   timeout=300)
                assert h.returncode == 0, h.stderr
            restarted += leaders
            # the test's restarts of a leader whose ISR lacked a replica leave its partitions under
            # min ISR until the restarted brokers have caught up (CI: 4 such samples right after the
            # hook returned): the sampler stays paused until every replica is back in sync
            leaders = _wait_in_sync(sampler, 300, settle_s=90, restarted=restarted)
    return step, restarted, run_id


def _wait_in_sync(sampler: Sampler, timeout_s: float, settle_s: float, restarted: list[int]) -> list[int]:
    """Until every partition of the sampler's topics has all its replicas in sync ([] then), or,
    once ``settle_s`` passed, until a partition short of a replica is led by a broker not in
    ``restarted`` whose partitions each have another in-sync replica: such leaders then, to restart."""
    a = admin(sampler.bootstrap, sampler.client)
    behind: list[str] = ["not read yet"]
    short_under: list[int] = []
    t0 = time.monotonic()

    def in_sync() -> bool:
        try:
            md = a.list_topics(timeout=5)
            short = [(t, p, pm) for t in sampler.topics for p, pm in md.topics[t].partitions.items()
                     if pm.leader < 0 or set(pm.isrs) != set(pm.replicas)]
            behind[:] = [f"{t}-{p} isr {pm.isrs} of {pm.replicas} (leader {pm.leader})" for t, p, pm in short]
            # a leader to restart: not restarted yet, and none of its partitions left without
            # another in-sync replica to take over (else a replica is still catching up under it)
            alone = {pm.leader for t in sampler.topics for pm in md.topics[t].partitions.values() if len(pm.isrs) < 2}
            short_under[:] = sorted({pm.leader for _, _, pm in short if pm.leader >= 0} - set(restarted) - alone)
        except Exception as e:  # noqa: BLE001 - a broker still starting: read again
            behind[:] = [f"metadata not read: {e}"]
        return not behind or (time.monotonic() - t0 > settle_s and bool(short_under))

    try:
        wait_for(in_sync, timeout_s, 0.5, "every replica back in sync")
    except AssertionError:
        raise AssertionError(f"not back in sync {timeout_s:.0f} s after the test's restarts: {behind[:5]}") from None
    return short_under if behind else []


def run_mending_stuck_isr(run: list[str], resume: list[str], loop: str, hook: str, sampler: Sampler,
                          env: dict[str, str]) -> tuple[subprocess.CompletedProcess, list[int], tuple | None]:
    """``kops RUN`` (a playbook run); stopped once by Kafka 3.9.2's stuck ISR in ``loop``,
    :func:`mend_stuck_isr` with ``hook`` and ``kops playbook run NAME --resume RUN_ID RESUME``
    (``resume``: the connection options again; the params are the run's). Returns the last run,
    the exit codes run after run and the mended stop (None)."""
    stuck, exits = None, []
    for _attempt in range(2):
        r = kops(*run, env=env, timeout=1800)
        exits.append(r.returncode)
        if r.returncode == 0 or stuck is not None:
            break
        stuck = mend_stuck_isr(r, loop, hook, sampler)
        run = [*run[:3], "--resume", stuck[2], *resume]
    return r, exits, stuck


def record_row(record, scenario: str, mode: str, version: str, prod: Producing, got: set[bytes], sampler: Sampler,
               exits: list[int], seconds: float, stuck: tuple | None = None) -> None:
    """The test's row of docs/reliability.md: the playbook's exit codes (run after run) and time,
    what was acknowledged and lost, what the sampler saw, and the stuck ISR the test mended."""
    detail = (f"{sampler.samples} metadata samples during the playbook (at most {sampler.max_gap_s:.1f} s apart), "
              f"{len(sampler.bad)} offline/under-min-ISR")
    if stuck:
        detail += f"; Kafka 3.9.2's stuck ISR at {stuck[0]}: leader(s) {stuck[1]} restarted by the test, then --resume"
    record(scenario=scenario, mode=mode, kafka_version=version, acknowledged=len(prod.acked), lost=len(prod.acked - got),
           failed_sends=prod.failed, kops_exit=" -> ".join(map(str, exits)), kops_s=round(seconds, 1), detail=detail)


def assert_sampled(sampler: Sampler) -> None:
    """The sampler saw the whole run (more than 20 samples, none more than 15 s apart) and no
    partition offline or under min ISR in any sample."""
    assert sampler.samples > 20 and sampler.max_gap_s < 15, (sampler.samples, sampler.max_gap_s)
    assert sampler.bad == [], sampler.bad[:10]
