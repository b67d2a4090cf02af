"""Where the Spark merge spends its CPU: executor CPU per stage, and optionally the hottest JVM frames.

    python bench/profile_logs.py --data /tmp/kops-bench-logs [--cores 2] [--format text|json] [--jfr]

Runs ``merged_records`` + ``write_spark_text`` (what ``bench_logs.py --runs spark-dir`` times) in a
``local[N]`` session with the UI on (a free port on 127.0.0.1), then reads every stage's executor CPU,
GC time, input and shuffle bytes from the UI's REST API, and the JVM's own CPU seconds (executors,
JIT, GC and driver threads) from /proc. With ``--jfr`` the JVM runs Java Flight Recorder and the
top frames (self and inclusive) of its execution samples are printed (needs ``jcmd`` and ``jfr``
from the JDK).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def thread_cpu(pid: int) -> list[tuple[str, float]]:
    """CPU seconds of the JVM's live threads, grouped by name (task threads, JIT compilers, GC, ...);
    threads that already ended are not listed (their CPU is in the process total)."""
    groups: collections.Counter = collections.Counter()
    tck = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                raw = f.read()
        except OSError:
            continue
        name = raw[raw.index("(") + 1:raw.rindex(")")]
        fields = raw.rsplit(")", 1)[1].split()
        group = name.rstrip("0123456789#-").strip() or name
        groups[group] += (int(fields[11]) + int(fields[12])) / tck
    return [(g, s) for g, s in groups.most_common() if s >= 0.5]


def jfr_top(path: str, n: int = 25) -> None:
    raw = subprocess.run(["jfr", "print", "--json", "--stack-depth", "64", "--events", "jdk.ExecutionSample", path],
                         capture_output=True, text=True, check=True).stdout
    events = json.loads(raw)["recording"]["events"]
    own, incl = collections.Counter(), collections.Counter()
    callers: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    driver = collections.Counter()  # inclusive frames of the threads that are not task threads
    n_driver = 0
    for e in events:
        frames = [f["method"]["type"]["name"].rsplit(".", 1)[-1] + "." + f["method"]["name"]
                  for f in e["values"]["stackTrace"]["frames"]]
        if frames:
            own[frames[0]] += 1
            callers[frames[0]][" < ".join(frames[1:4])] += 1
            incl.update(set(frames))
            thread = (e["values"].get("sampledThread") or {}).get("javaName") or ""
            if not thread.startswith("Executor task"):
                n_driver += 1
                driver.update(set(frames))
    print(f"\nJFR: {len(events)} execution samples, {n_driver} outside the task threads (planning, "
          "code generation, the driver); their top inclusive frames:")
    for name, c in driver.most_common(n):
        print(f"  {c:6d}  {name}")
    for title, counter in (("self", own), ("inclusive", incl)):
        print(f"-- {title}")
        for name, c in counter.most_common(n):
            print(f"{100 * c / len(events):5.1f}% {name}")
    print("-- callers of the top self frames")
    for name, c in own.most_common(6):
        print(f"{100 * c / len(events):5.1f}% {name}")
        for chain, k in callers[name].most_common(4):
            print(f"      {100 * k / len(events):5.1f}% < {chain}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--format", choices=("text", "json"), default="text")
    ap.add_argument("--jfr", action="store_true")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting to compare (repeatable), e.g. spark.shuffle.compress=false")
    ap.add_argument("--java-opts", default="", help="more JVM options after kops' own (embedded_java_opts), e.g. "
                    "JIT settings to compare (KOPS_SPARK_JAVA_OPTS= for the JVM's defaults)")
    a = ap.parse_args()

    from pyspark.sql import SparkSession

    from kops.pipeline import statechange as sc
    from kops.pipeline.session import _quiet_log4j2_file, embedded_java_opts
    from kops.sandbox.procs import free_ports

    work = tempfile.mkdtemp(prefix="kops-profile-logs-")
    jfr = os.path.join(work, "merge.jfr")
    opts = f"-Dlog4j2.configurationFile=file:{_quiet_log4j2_file()} {embedded_java_opts(os.cpu_count() or 2)}"
    if a.java_opts:
        opts += " " + a.java_opts
    if a.jfr:
        opts += f" -XX:StartFlightRecording=filename={jfr},settings=profile"
    spark = (
        SparkSession.builder.master(f"local[{a.cores}]").appName("kops-profile-logs")
        .config("spark.ui.showConsoleProgress", "false").config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.adaptive.enabled", "true").config("spark.ui.enabled", "true")
        .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.port", str(free_ports(1)[0]))
        .config("spark.sql.shuffle.partitions", str(max(2, 4 * a.cores))).config("spark.driver.memory", "2g")
        .config("spark.driver.extraJavaOptions", opts)
    )
    for kv in a.conf:
        key, _, value = kv.partition("=")
        spark = spark.config(key, value)
    spark = spark.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        t0 = time.time()
        stats = sc.MergeStats()
        df = sc.merged_records(spark, sc.expand_sources([a.data]), sc.Filters(), stats)
        sc.write_spark_text(df, "file://" + os.path.join(work, "out") + "/", a.format, stats)
        wall = time.time() - t0
        pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        jvm_cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        url = f"{spark.sparkContext.uiWebUrl}/api/v1/applications/{spark.sparkContext.applicationId}/stages"
        stages = json.load(urllib.request.urlopen(url))
        total = 0.0
        print("stage  tasks   cpu s    gc s   input MB  shuffle w MB  shuffle r MB  what")
        for s in sorted(stages, key=lambda s: s["stageId"]):
            cpu = s["executorCpuTime"] / 1e9
            total += cpu
            if cpu >= 0.5:
                print(f"{s['stageId']:5} {s['numTasks']:6} {cpu:7.1f} {s['jvmGcTime'] / 1e3:7.1f} "
                      f"{s['inputBytes'] / 1e6:10.0f} {s['shuffleWriteBytes'] / 1e6:13.0f} "
                      f"{s['shuffleReadBytes'] / 1e6:13.0f}  {s['name'][:50]}")
        size = sum(os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(a.data) for n in ns
                   if n.startswith("state-change.log"))
        print(f"\n{stats.lines} lines, {size / 1e6:.0f} MB: wall {wall:.1f} s, JVM CPU {jvm_cpu:.1f} s "
              f"(stages {total:.1f} s; the rest is JIT, GC and driver threads), {size / 1e6 / jvm_cpu:.1f} MB per CPU-s")
        for group, secs in thread_cpu(pid):
            print(f"  {secs:7.1f} CPU-s  {group}")
        if a.jfr:  # the recording is written at the JVM's exit, which comes after this script's: dump it now
            subprocess.run(["jcmd", str(pid), "JFR.dump", "name=1", f"filename={jfr}"], check=True,
                           capture_output=True)
    finally:
        spark.stop()
    if a.jfr:
        jfr_top(jfr)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
