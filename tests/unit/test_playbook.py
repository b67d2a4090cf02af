"""Playbook files: validation with line numbers, parameters, and the engine's state/resume
logic with the generic steps (offline: dry runs on a snapshot, plus shell/notify/pause)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kops.cli.main import app
from kops.errors import BadInput
from kops.playbook import engine
from kops.playbook.library import available
from kops.inputs.values import duration, size
from kops.playbook.spec import bind_params, parse_playbook

DATA = Path(__file__).parent / "data"
runner = CliRunner()


def test_shipped_playbooks_are_valid():
    names = set(available())
    assert {"rack-maintenance", "drain-rack", "decommission-broker", "add-brokers", "replace-broker"} <= names
    from kops.playbook.library import find

    for n in names:
        pb = find(n)
        assert pb.steps and pb.name == n


BAD = """\
name: broken
params:
  rack: {type: rack, required: true}
steps:
  - {id: a, type: health_gate}
  - {id: a, type: wait_for, condition: no_leaders, rack: "{rack}", timeout: 10s}
  - {id: c, type: teleport}
  - {id: d, type: pause}
  - {id: e, type: wait_for, condition: sunshine, timeout: 5s}
  - {id: f, type: execute, plan: nowhere}
  - {id: g, type: demote, rack: "{zone}"}
  - {id: h, type: shell, command: "true", colour: red}
  - {id: i, type: wait_for, condition: healthy, timeout: soon}
"""


def test_bad_playbook_names_every_problem_with_its_line():
    with pytest.raises(BadInput) as e:
        parse_playbook(BAD, source="bad.yaml")
    d = "\n".join(e.value.details)
    assert "bad.yaml:6: step 'a': duplicate id (first used on line 5)" in d
    assert "bad.yaml:7: step 'c': unknown step type 'teleport'" in d
    assert "bad.yaml:8: step 'd': a pause step needs 'message'" in d
    assert "bad.yaml:9: step 'e': field 'condition': 'sunshine' is not one of" in d
    assert "bad.yaml:10: step 'f': field 'plan' refers to step 'nowhere'" in d
    assert "bad.yaml:11: step 'g': field 'rack' uses undeclared parameter {zone}" in d
    assert "bad.yaml:12: step 'h': unknown field 'colour'" in d
    assert "bad.yaml:13: step 'i': field 'timeout': 'soon' is not a duration" in d


def test_invalid_yaml_reports_line():
    with pytest.raises(BadInput, match=r"x.yaml:3:1: not valid YAML"):
        parse_playbook("name: x\nsteps: [\n", source="x.yaml")


def test_params_and_values():
    pb = parse_playbook(
        "name: p\nparams:\n  rack: {type: rack, required: true}\n  t: {type: bytes, default: 10MB}\n"
        "  n: {type: int}\nsteps:\n  - {id: s, type: notify, message: 'rack {rack}'}\n"
    )
    assert bind_params(pb, {"rack": "b"}) == {"rack": "b", "t": 10 * 1024 * 1024}
    with pytest.raises(BadInput) as e:
        bind_params(pb, {"n": "x", "zone": "1"})
    d = " ".join(e.value.details)
    assert "missing parameter 'rack'" in d and "unknown parameter 'zone'" in d and "'x' is not an integer" in d
    assert duration("5m") == 300 and duration(7) == 7 and size("2KiB") == 2048


def test_dry_run_on_snapshot_changes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPS_HOME", str(tmp_path))
    r = runner.invoke(app, ["playbook", "run", "rack-maintenance", "--param", "rack=b", "--dry-run",
                            "--topology", str(DATA / "topo6.json"), "--output", "json"])
    assert r.exit_code == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["status"] == "dry-run"
    assert [s["status"] for s in rep["steps"]] == ["done"] * len(rep["steps"])
    assert "would pause" in rep["steps"][3]["summary"]
    assert not (tmp_path / "playbook-runs").exists()  # a dry run writes no state


def test_unknown_rack_is_rejected_before_any_step(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPS_HOME", str(tmp_path))
    r = runner.invoke(app, ["playbook", "run", "rack-maintenance", "--param", "rack=zz", "--dry-run",
                            "--topology", str(DATA / "topo6.json")])
    assert r.exit_code == 2
    assert "unknown rack 'zz'" in r.stderr


def test_missing_param_exit_2(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPS_HOME", str(tmp_path))
    r = runner.invoke(app, ["playbook", "run", "rack-maintenance", "--dry-run", "--topology", str(DATA / "topo6.json")])
    assert r.exit_code == 2 and "missing parameter 'rack'" in r.stderr


GENERIC = """\
name: generic
params:
  word: {type: str, default: hello}
steps:
  - {id: one, type: shell, command: "echo $KOPS_PARAM_WORD >> {word}.out"}
  - {id: wait, type: pause, message: "check the file"}
  - {id: two, type: notify, message: "said {word}", file: notes.txt}
  - {id: fail, type: shell, command: "test -f go"}
  - {id: three, type: shell, command: "echo done >> {word}.out"}
"""


def test_state_pause_failure_and_resume(tmp_path, monkeypatch):
    """Runs the generic steps for real: a non-interactive pause stops the run (exit 3),
    resuming continues after it; a failing step stops it again; resuming re-runs only from
    that step, never repeating finished ones."""
    monkeypatch.setenv("KOPS_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    pb_file = tmp_path / "generic.yaml"
    pb_file.write_text(GENERIC)
    from kops.cli.common import Context, Output
    from kops.cluster.snapshot import load_topology
    from kops.playbook.spec import load_playbook

    # these steps need no cluster; the pre-flight check reads a snapshot instead
    monkeypatch.setattr(engine.RunContext, "topology", lambda self: load_topology(DATA / "topo6.json"))
    ctx = Context(None, None, None, 5.0, Output.table)
    pb = load_playbook(pb_file)
    msgs: list[str] = []
    with pytest.raises(engine.PausedForOperator) as e:
        engine.run(pb, {}, ctx.connection, has_cluster=False, say=msgs.append, interactive=False)
    run_id = e.value.run_state.run_id
    assert (tmp_path / "hello.out").read_text() == "hello\n"
    with pytest.raises(engine.StepFailed):
        engine.run(pb, {}, ctx.connection, has_cluster=False, resume=run_id, say=msgs.append, interactive=False)
    state = json.loads((tmp_path / "home" / "playbook-runs" / f"{run_id}.json").read_text())
    assert [s["status"] for s in state["steps"]] == ["done", "done", "done", "failed", "pending"]
    (tmp_path / "go").write_text("")
    final = engine.run(pb, {}, ctx.connection, has_cluster=False, resume=run_id, say=msgs.append, interactive=False)
    assert final.status == "done"
    # 'one' ran exactly once across the three invocations; 'three' ran once
    assert (tmp_path / "hello.out").read_text() == "hello\ndone\n"
    assert "said hello" in (tmp_path / "notes.txt").read_text()
    rep = engine.report(final)
    assert [s["status"] for s in rep["steps"]] == ["done"] * 5


TYPED = """\
name: typed
params:
  rack: {type: rack, required: "false"}
  kind: {type: [rack]}
  wait: {type: duration, default: 1m}
steps:
  - {id: a, type: [health_gate]}
  - {id: p, type: plan, goal: rebalance, max_moves: -1}
  - {id: b, type: execute, plan: p, throttle: -1, max_moves_per_broker: 0, timeout: .nan}
  - {id: ../x, type: shell, command: "true", allow_failure: "false"}
  - {id: d, type: wait_for, condition: healthy, timeout: -5, interval: 0}
"""


def test_fields_are_typed_and_ranges_checked_at_validation():
    """Booleans are YAML booleans ('false' as a string would mean true), types are names,
    negative timeouts, throttles and move limits are refused before anything runs."""
    with pytest.raises(BadInput) as e:
        parse_playbook(TYPED, source="t.yaml")
    d = "\n".join(e.value.details)
    assert "t.yaml:3: parameter 'rack': 'required': 'false' is not true or false (a string" in d
    assert "t.yaml:4: parameter 'kind': unknown type ['rack']" in d
    assert "t.yaml:7: step 'a': unknown step type ['health_gate']" in d
    assert "step 'p': field 'max_moves': -1 is below 0" in d
    assert "step 'b': field 'throttle': -1 is below 1" in d
    assert "step 'b': field 'max_moves_per_broker': 0 is below 1" in d
    assert "step 'b': field 'timeout': nan is not a finite number" in d
    assert "step '../x': 'id': '../x' is not a step id" in d
    assert "step '../x': field 'allow_failure': 'false' is not true or false" in d
    assert "step 'd': field 'timeout': -5.0 is below 0.0" in d
    assert "step 'd': field 'interval': 0.0 is below 0.1" in d


def test_a_parameter_that_makes_a_field_bad_is_refused_before_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPS_HOME", str(tmp_path))
    pb = tmp_path / "p.yaml"
    pb.write_text("name: p\nparams:\n  t: {type: str}\n  n: {type: int}\nsteps:\n"
                  "  - {id: w, type: wait_for, condition: healthy, timeout: '{t}'}\n"
                  "  - {id: x, type: plan, goal: rebalance, max_moves: '{n}'}\n")
    r = runner.invoke(app, ["playbook", "run", str(pb), "--param", "t=-3", "--param", "n=-1", "--dry-run",
                            "--topology", str(DATA / "topo6.json"), "--output", "json"])
    assert r.exit_code == 2, r.stderr
    err = json.loads(r.stdout)["error"]
    assert "2 bad step fields" in err["message"]
    assert any("field 'timeout'" in x for x in err["details"]) and any("field 'max_moves'" in x for x in err["details"])


def test_resume_takes_a_run_id_and_reports_a_damaged_state_file(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPS_HOME", str(tmp_path))
    r = runner.invoke(app, ["playbook", "run", "rack-maintenance", "--resume", "../../x", "--output", "json"])
    assert r.exit_code == 2 and "not a run id" in json.loads(r.stdout)["error"]["message"]
    runs = tmp_path / "playbook-runs"
    runs.mkdir()
    (runs / "r1.json").write_text('{"run_id": "r1", "steps": [')
    r = runner.invoke(app, ["playbook", "run", "rack-maintenance", "--resume", "r1", "--output", "json"])
    assert r.exit_code == 2
    msg = json.loads(r.stdout)["error"]["message"]
    assert "r1.json:1:" in msg and "not valid JSON" in msg and "restore it from a backup" in msg
    (runs / "r1.json").write_bytes(b'{"run_id": "r1\xff"}')
    r = runner.invoke(app, ["playbook", "run", "rack-maintenance", "--resume", "r1"])
    assert r.exit_code == 2 and "not UTF-8" in r.stderr
    (runs / "r1.json").write_text(json.dumps({"run_id": "r1", "playbook": "rack-maintenance", "source": "x",
                                              "sha256": "x", "params": [], "steps": [{"id": "a", "status": 3}]}))
    r = runner.invoke(app, ["playbook", "run", "rack-maintenance", "--resume", "r1", "--output", "json"])
    assert r.exit_code == 2
    err = json.loads(r.stdout)["error"]
    assert "params: missing or not a dict" in err["details"] and "steps[0]: needs" in " ".join(err["details"])


# -- loops (for_each) and the restart hook (issue 20) -----------------------------------------------
LOOP = """\
name: loop
params:
  rack: {type: rack}
  hook: {type: str, default: "echo restarting {broker} on {host}:{port} in {rack}"}
steps:
  - {id: first, type: shell, command: "echo start >> loop.out"}
  - id: each
    type: for_each
    rack: "{rack}"
    steps:
      - {id: before, type: shell, command: "echo {broker} >> loop.out"}
      - {id: flaky, type: shell, command: "test {broker} != 3 -o -e go3"}
      - {id: restart, type: restart, broker: "{broker}", command: "{hook}", timeout: 30s}
  - {id: last, type: shell, command: "echo end >> loop.out"}
"""


def _offline_run(tmp_path, monkeypatch, text: str, topo_file: str = "topo6.json"):
    monkeypatch.setenv("KOPS_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    from kops.cli.common import Context, Output
    from kops.cluster.snapshot import load_topology

    monkeypatch.setattr(engine.RunContext, "topology", lambda self: load_topology(DATA / topo_file))
    monkeypatch.setattr(engine.RunContext, "brokers",
                        lambda self: {b.id: b for b in load_topology(DATA / topo_file).brokers})
    pb = parse_playbook(text, source="loop.yaml")
    ctx = Context(None, None, None, 5.0, Output.table)

    def run(params=None, **kw):
        msgs: list[str] = []
        try:
            return engine.run(pb, params or {}, ctx.connection, has_cluster=False, say=msgs.append,
                              interactive=False, **kw), msgs
        except Exception as e:  # noqa: BLE001 - the test looks at it
            e.msgs = msgs  # type: ignore[attr-defined]
            raise

    return run


def test_for_each_runs_its_steps_per_broker_in_a_safe_order_and_resumes_mid_loop(tmp_path, monkeypatch):
    """Rack by rack, the controller (broker 0, rack a) last; a step failing for broker 3 stops the
    run; --resume continues with broker 3's failed step, never repeating brokers done before; the
    restart hook gets its broker's id, host, port and rack, and its exit code and output are kept."""
    run = _offline_run(tmp_path, monkeypatch, LOOP)
    with pytest.raises(engine.StepFailed) as e:
        run()
    st = e.value.run_state
    assert st.loops == {"each": [2, 3, 4, 5, 1, 0]}
    assert (tmp_path / "loop.out").read_text().split() == ["start", "2", "3"]
    assert [s["id"] for s in st.steps if s["status"] == "failed"] == ["each.3.flaky"]
    (tmp_path / "go3").write_text("")
    final, msgs = run(resume=st.run_id)
    assert final.status == "done"
    assert (tmp_path / "loop.out").read_text().split() == ["start", "2", "3", "4", "5", "1", "0", "end"]
    assert any("resuming at broker 3 (step each.3.flaky)" in m for m in msgs), msgs
    saved = json.loads((tmp_path / "home" / "playbook-runs" / f"{st.run_id}.json").read_text())
    assert saved["loops"] == {"each": [2, 3, 4, 5, 1, 0]}
    restart = next(s for s in saved["steps"] if s["id"] == "each.4.restart")
    assert restart["status"] == "done" and restart["result"]["exit_code"] == 0
    assert restart["result"]["output_tail"][-1].startswith("restarting 4 on ")
    assert restart["result"]["output_tail"][-1].endswith(" in c")
    assert [s["id"] for s in saved["steps"]][:4] == ["first", "each.2.before", "each.2.flaky", "each.2.restart"]


def test_for_each_of_one_rack_and_a_failing_hook_stops_with_exit_3(tmp_path, monkeypatch):
    run = _offline_run(tmp_path, monkeypatch, LOOP.replace(
        'default: "echo restarting {broker} on {host}:{port} in {rack}"', 'default: "echo boom >&2; exit 7"'))
    (tmp_path / "go3").write_text("")
    with pytest.raises(engine.HookFailed) as e:
        run({"rack": "b"})
    assert e.value.exit_code == 3
    st = e.value.run_state
    assert st.loops == {"each": [2, 3]}
    failed = next(s for s in st.steps if s["status"] == "failed")
    assert failed["id"] == "each.2.restart"
    assert "exit code: 7" in failed["details"] and "boom" in failed["details"]
    assert any(f"--resume {st.run_id}" in m for m in e.value.msgs)


def test_the_resume_line_repeats_how_the_cluster_was_reached(tmp_path, monkeypatch):
    """The line an operator copies after a failure names the cluster as the run was given it (a
    `--resume` without `--bootstrap-server` fails with "no cluster given"), quoted for the shell."""
    from kops.cli.common import Context, Output

    ctx = Context("h1:9092,h2:9092", "/etc/kafka/admin client.properties", None, 5.0, Output.table)
    again = ctx.connection_args()
    assert again == " --bootstrap-server h1:9092,h2:9092 --command-config '/etc/kafka/admin client.properties'"
    assert Context(None, None, None, 5.0, Output.table).connection_args() == ""
    run = _offline_run(tmp_path, monkeypatch, LOOP.replace(
        'default: "echo restarting {broker} on {host}:{port} in {rack}"', 'default: "exit 7"'))
    (tmp_path / "go3").write_text("")
    with pytest.raises(engine.HookFailed) as e:
        run({"rack": "b"}, again=again)
    st = e.value.run_state
    assert f"fix the cause, then: kops playbook run {st.playbook} --resume {st.run_id}{again}" in e.value.msgs


def test_restart_hook_timeout_ends_the_whole_hook(tmp_path, monkeypatch):
    text = LOOP.replace("timeout: 30s", "timeout: 1s").replace(
        'default: "echo restarting {broker} on {host}:{port} in {rack}"', 'default: "sleep 30 & sleep 30"')
    run = _offline_run(tmp_path, monkeypatch, text)
    (tmp_path / "go3").write_text("")
    import time as _time

    t0 = _time.monotonic()
    with pytest.raises(engine.HookFailed) as e:
        run({"rack": "b"})
    assert _time.monotonic() - t0 < 15
    assert "did not finish within 1 s" in e.value.message


def test_for_each_dry_run_shows_the_expanded_steps(tmp_path, monkeypatch):
    run = _offline_run(tmp_path, monkeypatch, LOOP)
    final, msgs = run({"rack": "c"}, dry_run=True)
    assert final.status == "dry-run"
    ids = [s["id"] for s in final.steps]
    assert ids == ["first", "each.4.before", "each.4.flaky", "each.4.restart",
                   "each.5.before", "each.5.flaky", "each.5.restart", "last"]
    assert any("would restart broker 5 with: echo restarting 5 on" in m for m in msgs), msgs
    assert not (tmp_path / "loop.out").exists()


def test_loop_order_rack_by_rack_controller_last_or_as_given():
    from kops.cluster.snapshot import load_topology

    topo = load_topology(DATA / "topo6.json")
    assert engine.loop_brokers({}, topo) == [2, 3, 4, 5, 1, 0]
    from dataclasses import replace

    moved = replace(topo, controller=3)
    assert engine.loop_brokers({}, moved) == [0, 1, 4, 5, 2, 3]
    assert engine.loop_brokers({"rack": "b"}, moved) == [2, 3]
    assert engine.loop_brokers({"brokers": [5, 3, 1]}, moved) == [1, 5, 3]
    assert engine.loop_brokers({"brokers": [5, 3, 1], "order": "given"}, moved) == [5, 3, 1]
    with pytest.raises(BadInput, match="unknown brokers"):
        engine.loop_brokers({"brokers": [9]}, topo)


LOOP_BAD = """\
name: loopbad
params:
  hook: {type: str}
steps:
  - {id: outside, type: demote, broker: "{broker}"}
  - id: each
    type: for_each
    brokers: 1,2
    rack: a
    steps:
      - {id: inner, type: for_each, steps: [{id: y, type: health_gate}]}
      - {id: r, type: restart, broker: "{broker}", command: "ssh {hostname} restart"}
      - {id: r2, type: restart, broker: "{broker}"}
  - {id: empty, type: for_each, steps: []}
"""


def test_bad_loops_name_every_problem_with_its_line():
    with pytest.raises(BadInput) as e:
        parse_playbook(LOOP_BAD, source="lb.yaml")
    d = "\n".join(e.value.details)
    assert "lb.yaml:5: step 'outside': field 'broker' uses undeclared parameter ({broker} exists inside a for_each only)" in d
    assert "lb.yaml:11: step 'inner': a for_each step cannot hold another for_each" in d
    assert "lb.yaml:12: step 'r': field 'command' uses undeclared parameter {hostname}" in d
    assert "lb.yaml:13: step 'r2': a restart step needs 'command'" in d
    assert "lb.yaml:6: step 'each': give at most one of 'brokers' or 'rack'" in d
    assert "lb.yaml:14: step 'empty': 'steps' must be a non-empty list of steps" in d


def test_rolling_restart_playbook_validates_and_an_unset_rack_means_every_broker(tmp_path, monkeypatch):
    from kops.playbook.library import find

    pb = find("rolling-restart")
    run = _offline_run(tmp_path, monkeypatch, pb.text)
    final, _ = run({"restart_command": "ssh {host} sudo systemctl restart kafka"}, dry_run=True,
                   topology_file=str(DATA / "topo6.json"))
    assert final.loops == {"each": [2, 3, 4, 5, 1, 0]}
    kinds = [s["type"] for s in final.steps if s["id"].startswith("each.2.")]
    assert kinds == ["health_gate", "wait_for", "demote", "wait_for", "restart", "wait_for", "restore", "health_gate"]
    with pytest.raises(BadInput) as e:
        run({"restart_command": "x", "rack": "a", "brokers": "1"}, dry_run=True, topology_file=str(DATA / "topo6.json"))
    assert "give at most one of 'brokers' or 'rack'" in "\n".join(e.value.details)


def test_the_cron_pause_is_read_back_after_lifting_and_lifted_again(monkeypatch):
    """The end of a run lifts its cron pause and reads the record back: a lift that did not take
    (a read of the journal cut short while its leader moved, a write that timed out) is tried
    again; one that never takes is said, never a silent pause left for hours."""
    import contextlib

    from kops.ops import maintenance
    from kops.playbook.state import RunContext

    source = "playbook drain-rack run r1"
    ours = maintenance.Pause(reason="x", source=source, by="me", since="2026-01-01T00:00:00+00:00",
                             until="2999-01-01T00:00:00+00:00")
    record = {"pause": ours, "misses": 1}

    def unpause(conn, *, source=None):
        if record["misses"]:  # the first lift read nothing (stale) and wrote nothing
            record["misses"] -= 1
            return None
        lifted, record["pause"] = record["pause"], None
        return lifted

    monkeypatch.setattr(maintenance, "unpause", unpause)
    monkeypatch.setattr(maintenance, "current", lambda conn: record["pause"])
    said: list[str] = []
    ctx = RunContext(lambda: contextlib.nullcontext(object()), None, False, True, said.append, {})
    engine._lift_cron_pause(ctx, source, said.append)
    assert record["pause"] is None and said == ["kops' cron jobs resume"]

    record.update(pause=ours, misses=99)
    said.clear()
    engine._lift_cron_pause(ctx, source, said.append)
    assert len(said) == 1 and said[0].startswith("warning: could not lift the cron pause") and "unpause" in said[0]


def test_a_throttle_parameter_takes_a_rate_or_auto_and_the_execute_step_gets_it():
    from kops.inputs.values import AutoRate
    from kops.playbook.library import find
    from kops.playbook.spec import resolve_fields
    from kops.playbook.steps import _execute_options

    pb = find("drain-rack")
    execute = next(s for s in pb.steps if s.id == "execute")
    fixed = bind_params(pb, {"rack": "c"})
    assert fixed["throttle"] == 50 * 1024 * 1024
    assert _execute_options(resolve_fields(execute, fixed)).auto_throttle is None
    auto = bind_params(pb, {"rack": "c", "throttle": "auto:20M-200M"})
    assert json.loads(json.dumps(auto))["throttle"] == "auto:20M-200M"  # a run's state is JSON
    opts = _execute_options(resolve_fields(execute, auto))
    assert (opts.throttle, opts.auto_throttle) == (20 * 1024 * 1024, AutoRate(20 * 1024 * 1024, 200 * 1024 * 1024))
    with pytest.raises(BadInput) as e:
        bind_params(pb, {"rack": "c", "throttle": "auto:fast"})
    assert "auto:MIN-MAX" in " ".join(e.value.details)


def test_a_pause_is_reported_as_a_pause_not_an_error(monkeypatch):
    """A run stopped at an operator pause exits 3 and says ``paused:`` on stderr; a failed step
    still says ``error:`` (the CLI's one error reporter, kops.cli.common.handle_errors)."""
    import io

    import typer
    from rich.console import Console

    from kops.cli import common

    buf = io.StringIO()
    monkeypatch.setattr(common, "_stderr_console", Console(file=buf, soft_wrap=True, emoji=False))

    def stops(exc):
        @common.handle_errors
        def command():
            raise exc

        with pytest.raises(typer.Exit) as e:
            command()
        out = buf.getvalue()
        buf.seek(0)
        buf.truncate()
        return e.value.exit_code, out

    code, out = stops(engine.PausedForOperator("Rack b leads no partition. Proceed?"))
    assert code == 3 and out.startswith("paused: Rack b leads no partition.") and "error" not in out, out
    code, out = stops(engine.StepFailed("the hook exited 1"))
    assert code == 1 and out.startswith("error: the hook exited 1"), out


LATE = """\
name: late
steps:
  - {id: w, type: wait_for, condition: in_sync, brokers: [1, 2], timeout: 30s, interval: 0.1s}
  - {id: g, type: health_gate, timeout: 0.5s}
"""


def test_a_wait_takes_a_read_answered_too_late_as_not_yet(tmp_path, monkeypatch):
    """A wait polls the cluster while brokers restart: a read that timed out (ClusterTimeout,
    e.g. a request forwarded to a KRaft controller a rollback has stopped) is "not yet", not the
    end of the run; a gate whose every read times out fails at its deadline, naming what timed
    out."""
    from kops.cluster.snapshot import load_topology
    from kops.errors import ClusterTimeout

    run = _offline_run(tmp_path, monkeypatch, LATE)
    reads = {"n": 0}

    def late_twice(self):
        reads["n"] += 1
        if reads["n"] in (2, 3) or reads["n"] >= 5:  # (the first: the run's pre-flight read)
            raise ClusterTimeout("list partition reassignments: RequestTimedOutError (error 7)")
        return load_topology(DATA / "topo6.json")

    monkeypatch.setattr(engine.RunContext, "topology", late_twice)
    with pytest.raises(engine.StepFailed) as e:
        run()
    st = e.value.run_state
    assert [(s["id"], s["status"]) for s in st.steps] == [("w", "done"), ("g", "failed")]
    assert reads["n"] >= 6  # pre-flight, two late answers, the one that met the condition, the gate's
    assert "in_sync: 0 replicas on [1, 2] out of ISR" in st.step("w")["result"]["summary"]
    err = st.step("g")["error"]
    assert "healthy not reached within 0 s: the cluster did not answer in time" in err, err
    assert "RequestTimedOutError (error 7)" in err


def test_a_wait_that_times_out_names_the_last_answer_and_what_was_late():
    """The failure keeps what the last answered read said (here: broker 1 still registered), and
    adds what timed out after it."""
    from types import SimpleNamespace

    from kops.cluster.snapshot import load_topology
    from kops.errors import ClusterTimeout
    from kops.playbook.steps import wait_until

    reads = {"n": 0}

    def topology():
        reads["n"] += 1
        if reads["n"] > 1:
            raise ClusterTimeout("list partition reassignments: RequestTimedOutError (error 7)")
        return load_topology(DATA / "topo6.json")

    ctx = SimpleNamespace(topology=topology)
    with pytest.raises(engine.StepFailed) as e:
        wait_until("brokers_down", {"broker": 1}, ctx, 0.5, 0.1)
    assert reads["n"] > 2
    assert e.value.message == ("brokers_down not reached within 0 s: brokers [1] still registered; then the cluster "
                               "did not answer in time (list partition reassignments: RequestTimedOutError (error 7))")
