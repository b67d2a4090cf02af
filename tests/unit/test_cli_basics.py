"""CLI contract without a cluster: version, help, bad input exit codes, JSON purity."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kops.cli.main import app

DATA = Path(__file__).parent / "data"
runner = CliRunner()


def test_version_and_help():
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.stdout.startswith("kops ")
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0
    for group in ("sandbox", "cluster", "plan"):
        assert group in r.stdout


def test_help_does_not_import_heavy_modules():
    code = (
        "import sys; from kops.cli.main import app\n"
        "heavy = [m for m in ('confluent_kafka', 'kafka', 'kazoo', 'pyspark', 'matplotlib', 'jsonschema')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_describe_from_snapshot_json_is_pure():
    r = runner.invoke(app, ["cluster", "describe", "--topology", str(DATA / "topo6.json"), "--output", "json"])
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [b["id"] for b in doc["brokers"]] == [0, 1, 2, 3, 4, 5]


def test_global_options_before_the_command():
    r = runner.invoke(app, ["--output", "json", "cluster", "health", "--topology", str(DATA / "topo6.json")])
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["healthy"] is True


def test_health_human_output():
    r = runner.invoke(app, ["cluster", "health", "--topology", str(DATA / "topo6.json"), "--fail-on", "warning"])
    assert r.exit_code == 3  # the durability warning of topic logs counts with --fail-on warning
    assert "durability" in r.stdout


@pytest.mark.parametrize(
    "args, needle",
    [
        (["cluster", "describe", "--topology", "/nonexistent.json"], "does not exist"),
        (["cluster", "describe", "--bootstrap-server", "x:1", "--command-config", "/nonexistent.properties"],
         "--command-config"),
        (["cluster", "describe", "--bootstrap-server", "no-port"], "HOST:PORT"),
        (["cluster", "describe"], "--bootstrap-server"),
        (["cluster", "describe", "--no-such-option"], "No such option"),
        (["cluster", "health", "--topology", str(DATA / "topo6.json"), "--topic", "nope"], "unknown topic"),
    ],
)
def test_bad_input_exits_2(args, needle, monkeypatch):
    monkeypatch.delenv("KOPS_BOOTSTRAP_SERVER", raising=False)
    r = runner.invoke(app, args)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert needle in r.stderr


def test_malformed_snapshot_exits_2(tmp_path):
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps({"version": 1, "brokers": [{"id": -1}], "topics": []}))
    r = runner.invoke(app, ["cluster", "describe", "--topology", str(bad)])
    assert r.exit_code == 2
    assert "brokers[0].id" in r.stderr


def test_malformed_command_config_exits_2(tmp_path):
    cfg = tmp_path / "client.properties"
    cfg.write_text('security.protocol=SASL_SSL\nsasl.jaas.config=com.example.Weird required;\n')
    r = runner.invoke(app, ["cluster", "describe", "--bootstrap-server", "127.0.0.1:1", "--command-config", str(cfg)])
    assert r.exit_code == 2
    assert "sasl.jaas.config" in r.stderr


# -- with --output json, a failure is one JSON error document on stdout too ------------------


@pytest.mark.parametrize(
    "args, exit_code, needle",
    [
        (["cluster", "describe", "--topology", "/nonexistent.json", "--output", "json"], 2, "does not exist"),
        (["--output", "json", "cluster", "describe", "--topology", "/nonexistent.json"], 2, "does not exist"),
        (["cluster", "health", "--topology", str(DATA / "topo6.json"), "--topic", "nope", "-o", "json"], 2,
         "unknown topic"),
        (["cluster", "describe", "--no-such-option", "--output", "json"], 2, "No such option"),  # a usage error
        (["--output", "json", "plan", "assign", "--brokers", "0,1"], 2, "Missing option"),
    ],
)  # fmt: skip
def test_json_mode_errors_are_one_json_document(args, exit_code, needle, monkeypatch):
    monkeypatch.delenv("KOPS_BOOTSTRAP_SERVER", raising=False)
    r = runner.invoke(app, args)
    assert r.exit_code == exit_code, (r.stdout, r.stderr)
    doc = json.loads(r.stdout)  # exactly one document, nothing else
    err = doc["error"]
    assert err["exit_code"] == exit_code and err["type"] == "bad_input"
    assert needle in err["message"] and isinstance(err["details"], list)
    assert needle in r.stderr  # the human message is still on stderr


def test_env_selects_json_errors_human_mode_keeps_stdout_empty(monkeypatch):
    topo = str(DATA / "topo6.json")
    monkeypatch.setenv("KOPS_OUTPUT", "json")
    r = runner.invoke(app, ["plan", "assign", "--brokers", "0,1", "--racks", "0:a,7:b", "--partitions", "3",
                            "--replication-factor", "1"])
    assert r.exit_code == 2
    assert json.loads(r.stdout)["error"]["type"] == "bad_input"
    monkeypatch.delenv("KOPS_OUTPUT")
    r = runner.invoke(app, ["cluster", "health", "--topology", topo, "--topic", "nope"])  # human mode
    assert r.exit_code == 2 and r.stdout == ""


def test_error_document_never_follows_a_document(capsys):
    from kops.cli import common

    common.reset_json_state()
    common.emit_json({"ok": True})
    common.emit_error_json(1, "late failure")
    out = capsys.readouterr().out
    assert json.loads(out) == {"ok": True}  # still exactly one document
    common.reset_json_state()
    common.emit_error_json(3, "another execution is running", ["id x"], exc=None)
    doc = json.loads(capsys.readouterr().out)
    assert doc == {"error": {"exit_code": 3, "type": "not_done", "class": None,
                             "message": "another execution is running", "details": ["id x"]}}


def test_error_types():
    from kops.cli.common import error_type
    from kops.errors import AuthorizationError, BadInput, ClusterError, KopsError

    assert error_type(BadInput("x"), 2) == "bad_input"
    assert error_type(AuthorizationError("x"), 1) == "not_authorized"
    assert error_type(ClusterError("x"), 1) == "cluster_error"
    assert error_type(KopsError("x"), 1) == "failure"
    assert error_type(RuntimeError("x"), 1) == "internal_error"
    assert error_type(KeyboardInterrupt(), 130) == "interrupted"


def test_sandbox_fault_verbs_name_exactly_one_target(tmp_path):
    """`sandbox slow` takes one broker, one rack or one KRaft controller; two, or none, is bad
    input (exit 2) before any sandbox is looked for (a controller on a ZooKeeper sandbox:
    test_docker_sandbox_config)."""
    for args in (["--broker", "1", "--controller", "1000"], ["--rack", "a", "--controller", "1000"], [],
                 ["--broker", "1", "--rack", "a"]):
        r = runner.invoke(app, ["sandbox", "slow", *args, "--delay", "100ms", "--workdir", str(tmp_path / "none")])
        assert r.exit_code == 2, (args, r.output)
        assert "exactly one target" in r.output
    assert not (tmp_path / "none").exists()
    r = runner.invoke(app, ["sandbox", "slow", "--help"])
    assert "--controller" in r.output and r.exit_code == 0
