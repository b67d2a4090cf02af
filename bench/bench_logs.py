"""Merge throughput of ``kops logs merge`` (Spark, local mode) vs single-process baselines.

    python bench/gen_logs.py --out /tmp/kops-bench-logs --size 270M --days 8     # ~2.1 GB, 6 brokers
    python bench/bench_logs.py --data /tmp/kops-bench-logs --cores 1,2 --runs spark-text,spark-dir,heapq,sort-m

Runs (each in its own process, output written to --out-dir then deleted):

* ``heapq``     — :mod:`kops.pipeline.baseline`: streaming k-way heap merge in Python, same text output
                  as ``kops logs merge`` (``broker=N`` prefix, stack traces kept under their record);
* ``sort-m``    — GNU ``sort -m`` on the timestamp (``LC_ALL=C``): a merge of raw lines, no broker prefix,
                  continuation lines compared as lines of their own (so not a correct merge of stack traces);
* ``spark-text``— ``kops logs merge --output FILE`` (sorted in Spark, streamed to one local file through the
                  driver with ``toLocalIterator``), with ``local[N]`` for each N of ``--cores``;
* ``spark-dir`` — ``kops logs merge --output DIR/`` (Spark writes the ordered part files itself);
* ``spark-parquet`` — ``--format parquet`` (every field parsed, partitioned by date/topic).

Spark figures include the session start (reported separately too). MB/s and lines/s are input bytes and
input lines per wall-clock second.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)


def _files(data: str) -> list[str]:
    out = []
    for d, _, names in os.walk(data):
        out.extend(os.path.join(d, n) for n in names if n.startswith("state-change.log"))
    return sorted(out)


def _count_lines(files: list[str]) -> int:
    r = subprocess.run(["wc", "-l", *files], capture_output=True, text=True, check=True)
    return int(r.stdout.strip().splitlines()[-1].split()[0]) if len(files) > 1 else int(r.stdout.split()[0])


def _jvm_cpu_s(spark) -> float:
    """CPU seconds (user+sys) of the driver JVM, from /proc (local mode: the executors are in it)."""
    try:
        pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except Exception as e:  # never lose the timing for the CPU figure
        print(f"jvm cpu: {e}", file=sys.stderr)
        return float("nan")


def worker_spark(data: str, out: str, cores: int, mode: str) -> dict:
    from kops.pipeline import statechange as sc
    from kops.pipeline.session import get_spark

    t0 = time.time()
    sources = sc.expand_sources([data])
    spark = get_spark(f"local[{cores}]", shuffle_partitions=max(2, 4 * cores), input_bytes=sc.local_bytes(sources))
    t1 = time.time()
    stats = sc.MergeStats()
    df = sc.merged_records(spark, sources, sc.Filters(), stats)
    if mode == "spark-text":
        n = 0
        with open(out, "w", encoding="utf-8") as f:
            for line in sc.iter_lines(df, "text", stats):
                f.write(line)
                f.write("\n")
                n += 1
    elif mode == "spark-dir":
        sc.write_spark_text(df, out + "/", "text", stats)
        n = stats.lines
    else:
        sc.write_parquet(df, out)
        n = stats.lines
    t2 = time.time()
    jvm_cpu = _jvm_cpu_s(spark)
    spark.stop()
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {"session_s": round(t1 - t0, 1), "merge_s": round(t2 - t1, 1), "total_s": round(t2 - t0, 1), "written": n,
            "unparsed": stats.unparsed_lines, "cpu_s": round(jvm_cpu + ru.ru_utime + ru.ru_stime, 1)}


def worker_heapq(data: str, out: str) -> dict:
    from kops.pipeline import baseline

    t0 = time.time()
    with open(out, "w", encoding="utf-8", buffering=1 << 20) as f:
        n = baseline.merge_to(f, baseline.files_of(data))
    return {"total_s": round(time.time() - t0, 1), "written": n}


def worker_sort(data: str, out: str) -> dict:
    files = _files(data)
    t0 = time.time()
    with open(out, "w") as f:
        subprocess.run(["sort", "-m", "-s", "-k1,2", *files], stdout=f, check=True, env={**os.environ, "LC_ALL": "C"})
    return {"total_s": round(time.time() - t0, 1), "written": None}


def run_one(kind: str, data: str, out_dir: str, cores: int | None) -> dict:
    out = os.path.join(out_dir, f"out-{kind}-{cores or 1}")
    cmd = [sys.executable, __file__, "--worker", kind, "--data", data, "--out", out]
    if cores:
        cmd += ["--cores", str(cores)]
    t0 = time.time()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.time() - t0
    if r.returncode != 0:
        return {"run": kind, "cores": cores, "error": r.stderr[-2000:]}
    res = json.loads(r.stdout.strip().splitlines()[-1])
    res.update({"run": kind, "cores": cores or 1, "process_wall_s": round(wall, 1)})
    if "cpu_s" not in res:  # waited-for children: the worker and its sort/python
        res["cpu_s"] = round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1)
    if os.path.isdir(out):
        shutil.rmtree(out, ignore_errors=True)
    elif os.path.exists(out):
        os.remove(out)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out-dir", default=None)
    ap.add_argument("--cores", default="1,2")
    ap.add_argument("--runs", default="heapq,sort-m,spark-text,spark-dir")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None, help="also write the results to this file")
    a = ap.parse_args(argv)

    if a.worker:
        if a.worker.startswith("spark"):
            res = worker_spark(a.data, a.out, int(a.cores), a.worker)
        elif a.worker == "heapq":
            res = worker_heapq(a.data, a.out)
        else:
            res = worker_sort(a.data, a.out)
        print(json.dumps(res))
        return 0

    files = _files(a.data)
    size = sum(os.path.getsize(f) for f in files)
    lines = _count_lines(files)
    out_dir = a.out_dir or os.path.join(os.path.dirname(a.data.rstrip("/")), "kops-bench-out")
    os.makedirs(out_dir, exist_ok=True)
    print(f"data: {len(files)} files, {size / 1e6:.0f} MB, {lines} lines, {os.cpu_count()} CPUs", flush=True)
    results = []
    for kind in a.runs.split(","):
        for c in ([int(x) for x in a.cores.split(",")] if kind.startswith("spark") else [None]):
            res = run_one(kind, a.data, out_dir, c)
            if "error" not in res:
                t = res["total_s"]
                res["MB_per_s"] = round(size / 1e6 / t, 1)
                res["lines_per_s"] = int(lines / t)
                res["MB_per_cpu_s"] = round(size / 1e6 / max(res["cpu_s"], 0.1), 1)
                res["load_avg"] = round(os.getloadavg()[0], 1)
            results.append(res)
            print(json.dumps(res), flush=True)
    print()
    print("| run | cores | wall s | session s | MB/s | lines/s | CPU s | MB per CPU-s | load avg |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        if "error" in r:
            print(f"| {r['run']} | {r['cores']} | error | | | | | | |")
            continue
        print(f"| {r['run']} | {r['cores']} | {r['total_s']} | {r.get('session_s', '-')} | {r['MB_per_s']} | "
              f"{r['lines_per_s']:,} | {r['cpu_s']} | {r['MB_per_cpu_s']} | {r['load_avg']} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"bytes": size, "lines": lines, "files": len(files), "results": results}, f, indent=2)
    shutil.rmtree(out_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
