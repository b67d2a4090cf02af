"""Start-up time of the kops CLI: `kops --help`, `kops --version`, and a subcommand's --help.

Target (issue 2): `kops --help` <= 0.3 s. Runs each command N times in fresh processes and
prints min / median / max wall time, with `python -c pass` as the interpreter baseline.

    .venv/bin/python bench/bench_startup.py [--runs 20]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def measure(cmd: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    kops = shutil.which("kops", path=str(Path(sys.executable).parent)) or "kops"
    cases = {
        "python -c pass (baseline)": [sys.executable, "-c", "pass"],
        "kops --version": [kops, "--version"],
        "kops --help": [kops, "--help"],
        "kops cluster describe --help": [kops, "cluster", "describe", "--help"],
    }
    print(f"{'command':34} {'min':>7} {'median':>7} {'max':>7}  (s, {args.runs} runs)")
    for name, cmd in cases.items():
        t = measure(cmd, args.runs)
        print(f"{name:34} {min(t):7.3f} {statistics.median(t):7.3f} {max(t):7.3f}")


if __name__ == "__main__":
    main()
