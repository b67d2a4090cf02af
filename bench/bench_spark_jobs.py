"""What one ``kops logs`` command costs in Spark jobs, wall and CPU time (the fixed cost of a small merge).

    python bench/bench_spark_jobs.py [-v] -- logs merge --logs ZK_DIR --logs KRAFT_DIR --controller-log \\
        --format json --output /tmp/m.jsonl -q

Runs ``python -m kops ARGS`` from this checkout with Spark's event log on (``PYSPARK_SUBMIT_ARGS``,
written to a temporary directory and deleted), then counts the application's jobs, stages and tasks
from it. CPU is the whole process tree's (user + system): this process makes itself a child
subreaper (Linux), so the Spark JVM, which the Python driver does not wait for, is reaped and
counted here. ``-v`` lists the jobs (start after the application's start, duration, call site).
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv: list[str]) -> int:
    verbose = "-v" in argv[: argv.index("--")] if "--" in argv else False
    args = argv[argv.index("--") + 1:] if "--" in argv else argv
    ev = tempfile.mkdtemp(prefix="kops-eventlog-")
    env = dict(os.environ, PYTHONPATH=ROOT, PYSPARK_SUBMIT_ARGS=(
        "--conf spark.eventLog.enabled=true --conf spark.eventLog.compress=false "
        f"--conf spark.eventLog.rolling.enabled=false --conf spark.eventLog.dir=file://{ev} pyspark-shell"))
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    t0 = time.time()
    r = subprocess.run([sys.executable, "-m", "kops", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.time() - t0
    while True:  # the JVM, orphaned when the driver exits
        try:
            os.wait()
        except ChildProcessError:
            break
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        evs = [json.loads(line) for f in glob.glob(ev + "/*") for line in open(f)]
    finally:
        shutil.rmtree(ev, ignore_errors=True)
    if r.returncode:
        sys.stderr.write(r.stderr[-3000:])
    start = next((e["Timestamp"] for e in evs if e["Event"] == "SparkListenerApplicationStart"), None)
    jobs = [e for e in evs if e["Event"] == "SparkListenerJobStart"]
    ends = {e["Job ID"]: e["Completion Time"] for e in evs if e["Event"] == "SparkListenerJobEnd"}
    if verbose:
        for j in jobs:
            site = j.get("Properties", {}).get("callSite.short", "")
            print(f"  job {j['Job ID']:>3} +{(j['Submission Time'] - start) / 1000:7.2f}s "
                  f"{(ends.get(j['Job ID'], j['Submission Time']) - j['Submission Time']) / 1000:6.2f}s "
                  f"stages={j['Stage IDs']} {site}")
    print(json.dumps({
        "rc": r.returncode, "wall_s": round(wall, 1), "cpu_s": round(ru.ru_utime + ru.ru_stime, 1),
        "jobs": len(jobs), "stages_run": sum(e["Event"] == "SparkListenerStageCompleted" for e in evs),
        "tasks": sum(e["Event"] == "SparkListenerTaskEnd" for e in evs),
        "first_job_s": round((jobs[0]["Submission Time"] - start) / 1000, 1) if jobs and start else None,
        "load_avg": round(os.getloadavg()[0], 1),
    }))
    return r.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
