"""Benchmark: the sandbox's own operations, this tree's kops against another tree's, side by side.

Each round runs, with each tool in turn (alternating which goes first), on a work dir and ports of
its own: ``kops sandbox up`` (ZooKeeper + 6 brokers, or KRaft with ``--mode kraft``, until every
broker is registered and in the metadata), ``stop --broker 1`` (controlled shutdown, until it
left the cluster), ``start --broker 1`` (until it is back), ``stop --rack b`` / ``start --rack b``,
and ``down --purge``. Wall time of each CLI call; the summary gives each tool's medians and the
ratio of this tree's to the other's (the target of issue 44: <= 1.05).

    .venv/bin/python bench/bench_sandbox.py --base /tmp/kops-base/.venv/bin/kops --rounds 3
    .venv/bin/python bench/bench_sandbox.py --base ... --mode kraft --engine docker

``--base EXE``: the other kops (e.g. a worktree of an earlier commit with its own venv:
``git worktree add /tmp/kops-base <commit> && (cd /tmp/kops-base && ./scripts/setup.sh)``).
Python's bytecode cache is left on (``PYTHONDONTWRITEBYTECODE`` unset for the runs), as an
installed kops has it; one warm-up call of each tool precedes the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("up", "stop broker", "start broker", "stop rack", "start rack", "down")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _free_run(n: int) -> int:
    """The first of ``n`` consecutive free ports below the ephemeral range."""
    import random

    from kops.sandbox.procs import port_in_use

    rnd = random.Random()
    while True:
        p = rnd.randrange(20000, 30000 - n)
        if not any(port_in_use("127.0.0.1", p + i) for i in range(n)):
            return p


def run_round(exe: str, mode: str, engine: str, workdir: Path, timeout: float) -> dict[str, float]:
    first = _free_run(8)  # brokers first..first+5, then ZooKeeper or the controller
    base = ["--workdir", str(workdir)]
    up = ["sandbox", "up", *base, "--mode", mode, "--engine", engine, "--base-port", str(first),
          "--zookeeper-port" if mode == "zookeeper" else "--controller-port", str(first + 7)]
    calls = {
        "up": up,
        "stop broker": ["sandbox", "stop", *base, "--broker", "1"],
        "start broker": ["sandbox", "start", *base, "--broker", "1"],
        "stop rack": ["sandbox", "stop", *base, "--rack", "b"],
        "start rack": ["sandbox", "start", *base, "--rack", "b"],
        "down": ["sandbox", "down", *base, "--purge"],
    }
    out: dict[str, float] = {}
    try:
        for step in STEPS:
            t0 = time.monotonic()
            r = subprocess.run([exe, *calls[step]], capture_output=True, text=True, timeout=timeout, env=_env())
            out[step] = round(time.monotonic() - t0, 2)
            if r.returncode != 0:
                raise SystemExit(f"{exe} {' '.join(calls[step])}: exit {r.returncode}\n{r.stderr[-2000:]}")
    finally:
        subprocess.run([exe, "sandbox", "down", *base, "--purge"], capture_output=True, timeout=timeout, env=_env())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the other tree's kops executable")
    ap.add_argument("--kops", default=str(ROOT / ".venv" / "bin" / "kops"), help="this tree's kops (default .venv)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mode", choices=("zookeeper", "kraft"), default="zookeeper")
    ap.add_argument("--engine", choices=("jvm", "docker"), default="jvm")
    ap.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    tools = {"kops": a.kops, "base": a.base}
    for exe in tools.values():  # warm-up: bytecode written, jars fetched, image built
        subprocess.run([exe, "--help"], capture_output=True, env=_env(), check=True)
    results: dict[str, list[dict[str, float]]] = {t: [] for t in tools}
    scratch = Path(tempfile.mkdtemp(prefix="kops-bench-sandbox-"))
    try:
        for i in range(a.rounds):
            order = list(tools) if i % 2 == 0 else list(reversed(tools))
            for name in order:
                r = run_round(tools[name], a.mode, a.engine, scratch / f"{name}-{i}", a.timeout)
                results[name].append(r)
                print(json.dumps({"round": i, "tool": name, **r}), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    summary = {}
    for step in STEPS:
        med = {t: statistics.median(r[step] for r in results[t]) for t in tools}
        summary[step] = {**med, "kops_vs_base": round(med["kops"] / med["base"], 3) if med["base"] else None}
    total = {t: statistics.median(sum(r.values()) for r in results[t]) for t in tools}
    summary["total"] = {**total, "kops_vs_base": round(total["kops"] / total["base"], 3)}
    print(json.dumps({"mode": a.mode, "engine": a.engine, "rounds": a.rounds, "summary": summary}, indent=2))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
