"""`kops logs merge / timeline` on a real Spark standalone cluster (issue 19: Spark past one machine).

A master and one worker are started as separate JVMs from the pyspark installation of the running
Python (``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``, on 127.0.0.1, free
ports, own work dir), and the real CLI (``python -m kops logs ...``) runs with ``--master
spark://127.0.0.1:PORT``: its executor is a JVM the worker launches. Every output must be byte for byte
the output of the same command on the default ``local[*]`` master. The inputs are the samples of the
local pipeline tests (tests/unit/test_pipeline_logs.py): Kafka 3.9 ZooKeeper-mode logs with a rotated
file, a stack trace and unparsed lines, and real KRaft lines with the controller's controller.log.

The driver's ``PYSPARK_PYTHON`` is a wrapper that records every Python worker an executor starts (and
then runs this Python): none may start, as docs/logs-pipeline.md says (the executors run Spark SQL
expressions only, so neither kops nor this Python is needed on the workers).

Not marked ``cluster``: no Kafka is needed. Master and worker (and the executors the worker started,
in the worker's process group) are stopped in a finalizer, also when the test fails.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from kops.sandbox.procs import free_ports
from tests import logsamples as s

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 180  # a loaded 2-core machine: two JVMs and the registration of the worker
RUN_TIMEOUT_S = 600


def _tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _write_samples(root: Path) -> tuple[Path, Path]:
    """The `logs` and `kraft_logs` fixtures of tests/unit/test_pipeline_logs.py."""
    zk, kraft = root / "zk", root / "kraft"
    s.write_zookeeper_logs(zk)
    s.write_kraft_logs(kraft)
    return zk, kraft


class StandaloneCluster:
    """A Spark standalone master and one worker (1 core, 1 GB), each in its own process group."""

    def __init__(self, base: Path):
        import pyspark

        self.base = base
        self.spark_home = Path(pyspark.__file__).parent
        # every server of the test on 127.0.0.1 below the kernel's ephemeral range (the suite's
        # ports): the master, the worker, their UIs, the driver and its block manager (an executor's
        # takes the next port up); py4j's gateway alone binds port 0, hard-coded in pyspark
        (self.port, self.ui_port, self.worker_port, self.worker_ui_port, driver_port,
         block_port) = free_ports(6)
        self.url = f"spark://127.0.0.1:{self.port}"
        self.conf_dir = base / "conf"
        self.conf_dir.mkdir()
        # read by the master, the worker and the kops driver (spark-submit reads $SPARK_CONF_DIR):
        # Spark's 200 shuffle partitions would make each small stage 200 tasks on the one core;
        # no REST submission server (a fixed port, 6066) and no driver UI (ports 4040+)
        (self.conf_dir / "spark-defaults.conf").write_text(
            "spark.master.rest.enabled false\n"
            "spark.sql.shuffle.partitions 2\n"
            "spark.ui.enabled false\n"
            f"spark.driver.port {driver_port}\n"
            f"spark.blockManager.port {block_port}\n"
        )
        self.env = {
            **os.environ,
            "SPARK_HOME": str(self.spark_home),
            "SPARK_CONF_DIR": str(self.conf_dir),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(base / "local"),
            "SPARK_DAEMON_MEMORY": "512m",
        }
        self.procs: dict[str, subprocess.Popen] = {}
        self.watchdog: subprocess.Popen | None = None

    def _spawn(self, name: str, args: list[str]) -> None:
        log = self.base / f"{name}.log"
        with open(log, "wb") as out:
            self.procs[name] = subprocess.Popen(
                [str(self.spark_home / "bin" / "spark-class"), *args],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                cwd=self.base, start_new_session=True,  # its own process group: the executors too
            )
        with open(self.groups, "a") as f:  # (its pid is its group's id)
            f.write(f"{self.procs[name].pid}\n")

    def start(self) -> None:
        self._watch()
        (self.base / "work").mkdir()
        (self.base / "local").mkdir()
        self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(self.port), "--webui-port", str(self.ui_port)])
        self._spawn("worker", ["org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                               "--port", str(self.worker_port), "--cores", "1", "--memory", "1g",
                               "--webui-port", str(self.worker_ui_port),
                               "--work-dir", str(self.base / "work")])

    def _watch(self) -> None:
        """A watchdog of its own session: once this test process is gone (a run killed with
        SIGKILL never runs the finalizer), it kills the master's and the worker's process groups
        (their own sessions, out of reach of the run's process group) -- seen left running, with a
        kops driver waiting on them, after a killed run."""
        code = ("import os, signal, sys, time\n"
                "owner, groups = int(sys.argv[1]), sys.argv[2]\n"
                "while os.path.exists(f'/proc/{owner}'):\n"
                "    time.sleep(1)\n"
                "for g in open(groups).read().split():\n"
                "    try:\n"
                "        os.killpg(int(g), signal.SIGKILL)\n"
                "    except OSError:\n"
                "        pass\n")
        self.groups = self.base / "process-groups"
        self.groups.write_text("")
        self.watchdog = subprocess.Popen([sys.executable, "-c", code, str(os.getpid()), str(self.groups)],
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    def state(self) -> dict | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
                return json.load(r)
        except OSError:
            return None

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    pytest.fail(f"spark {name} exited with {p.returncode}:\n{_tail(self.base / f'{name}.log')}")
            st = self.state()
            if st and any(w.get("state") == "ALIVE" and w.get("cores", 0) >= 1 for w in st.get("workers", [])):
                return
            if time.monotonic() > deadline:
                pytest.fail(
                    f"no ALIVE worker at {self.url} after {START_TIMEOUT_S}s (master says {st}):\n"
                    f"{_tail(self.base / 'master.log')}\n---\n{_tail(self.base / 'worker.log')}"
                )
            time.sleep(0.3)

    def stop(self) -> None:
        if self.watchdog is not None:
            self.watchdog.kill()
            self.watchdog.wait()
        # the worker first (its shutdown kills its executors; so does killing its group)
        for name in ("worker", "master"):
            p = self.procs.get(name)
            if p is None:
                continue
            for sig, wait_s in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    p.wait(timeout=wait_s)
                    # the group may outlive its leader (an executor): make sure it is gone
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    break
                except subprocess.TimeoutExpired:
                    continue
                break


@pytest.fixture
def standalone(tmp_path, request):
    base = tmp_path / "spark"
    base.mkdir()
    cluster = StandaloneCluster(base)
    request.addfinalizer(cluster.stop)
    cluster.start()
    return cluster


def _kops(args: list[str], env: dict, cwd: Path) -> bytes:
    r = subprocess.run([sys.executable, "-m", "kops", *args], capture_output=True, env=env, cwd=cwd,
                       timeout=RUN_TIMEOUT_S)
    assert r.returncode == 0, f"kops {' '.join(args)} -> {r.returncode}\n{r.stderr.decode(errors='replace')[-4000:]}"
    return r.stdout


def test_logs_on_standalone_cluster_equal_local(standalone, tmp_path):
    zk, kraft = _write_samples(tmp_path / "logs")
    inputs = ["--logs", str(zk), "--logs", str(kraft), "--controller-log"]
    # a user's environment: kops importable from this checkout (as installed), run from elsewhere
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_", "KOPS_SPARK"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    runs = tmp_path / "runs"
    runs.mkdir()
    # two commands, to keep the test short (each run starts a Spark application): the JSON merge to a
    # file takes different paths (local[*]: Spark's ordered part files, concatenated; a cluster: the
    # sorted partitions streamed to the driver) and carries every parsed field; the timeline's tables
    # are aggregates and windows over those fields
    commands = {
        "merge-json-file": (["logs", "merge", *inputs, "--format", "json", "--output", "{out}/merged.jsonl"],
                            "merged.jsonl"),
        "timeline": (["logs", "timeline", *inputs, "--bucket", "10 seconds"], None),
    }

    def run_all(label: str, extra: list[str], run_env: dict) -> dict[str, bytes]:
        out = runs / label
        out.mkdir()
        results = {}
        for name, (args, out_file) in commands.items():
            args = [a.replace("{out}", str(out)) for a in args]
            stdout = _kops([*args, *extra], run_env, cwd=runs)
            results[name] = (out / out_file).read_bytes() if out_file else stdout
        return results

    # the local[*] reference runs while the master and the worker start
    local = run_all("local", [], env)
    standalone.wait_ready()

    marker = tmp_path / "python-workers"
    wrapper = tmp_path / "executor-python"
    wrapper.write_text(f'#!/bin/sh\necho "$$ $*" >> {marker}\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    sa_env = {**env, "SPARK_CONF_DIR": str(standalone.conf_dir), "PYSPARK_PYTHON": str(wrapper)}
    remote = run_all("standalone", ["--master", standalone.url], sa_env)

    for name in commands:
        assert local[name], f"{name}: no output"
        assert remote[name] == local[name], f"{name}: standalone output differs from local[*]"
    # the right data: every input line once (+ the timeline's three tables)
    n_lines = len(s.SAMPLE_BROKER1.splitlines()) + len(s.SAMPLE_BROKER2.splitlines()) + 2 + sum(
        len(v) for v in s.KRAFT_BROKER_LINES.values()) + len(s.KRAFT_CONTROLLER_LINES)
    merged = [json.loads(x) for x in local["merge-json-file"].splitlines()]
    assert len(merged) == n_lines and sum(r["kind"] == "unparsed" for r in merged) == 2
    assert local["timeline"].count(b"\n# ") == 2 and b"\n# ISR history\n" in local["timeline"]

    # each standalone run was an application of the cluster, with an executor on the worker
    st = standalone.state()
    apps = st["completedapps"] + st["activeapps"]
    assert len([a for a in apps if a["name"] == "kops-logs"]) == len(commands), apps
    assert any((standalone.base / "work").glob("app-*/*/stderr")), "no executor ran on the worker"
    # and no Python worker was started by an executor: only the driver runs kops' Python
    assert not marker.exists(), marker.read_text()
