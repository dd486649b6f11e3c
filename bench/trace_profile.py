"""Profile benchmark: the full trace profile (all metrics, whole trace and 1 h windows, trace and
device scope) on a generated trace of N million requests, local[2].

    .venv/bin/python bench/trace_profile.py --millions 5

(Not bench/profile.py: that name would shadow the standard library's `profile`,
which pyspark imports through cProfile, for every script run from bench/.)

The profile is read straight from the `requests` files (libs.table_io.profile, what the job
runs); --spark-path times the DataFrame path (compute_trace_profile) on the same trace afterwards and
checks both give the same rows.

Prints requests per second against the goal of 1.3 million (a C trace analyzer reaches 1.31 million
per second single-threaded on 20 million requests) and the peak resident memory of the whole
process tree (this Python driver, the JVM and its Python workers), sampled every 50 ms, against
the 2 GiB goal. The memory comes from as many runs again, of their own: the sampler's walks of /proc take
about a tenth of a core, which the timed runs leave out. A warm-up run on 200,000 requests comes first, then
--repeat runs on the N million (the median is reported against the goal, each run printed; the first carries
what the warm-up did not load: a Python worker that ran no block task there loads that compiled loop then). The
traces are generated and loaded by a child process first, so the measured process tree is what a profile job runs
(a fresh session reading the table), not the generator's leftovers.

--marginal-from M also profiles a trace of M million requests and prints the marginal rate from M to N million
requests, (N - M) / (t(N) - t(M)), which leaves out the fixed cost of a run (its session's jobs, the workers'
start). --libcachesim runs libCacheSim's TraceAnalyzer (PyPI `libcachesim`: its default analyses, 60 s windows) in
this process on the same requests, written to its CSV (time in seconds, the 512-byte block on its device as the
object id, the size), timed the same way (the CSV's writing left out), and prints blockheat's rate over its
(goal: 3x at 20 million requests, the marginal from 2 million).

--warehouse s3a://bucket/prefix keeps the tables (and the profile's scratch files) on an object store: without
AWS_ENDPOINT_URL set the bench starts S3Proxy on loopback itself (bench/object_store.py; its JVM is left out of
the peak memory, its CPU time is not).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import object_store  # noqa: E402  (bench/object_store.py, next to this script)
from marginal import rate  # noqa: E402  (bench/marginal.py, next to this script)
from memory import PeakMemory, parts_text  # noqa: E402  (bench/memory.py, next to this script)

GOAL_RPS = 1.3e6
GOAL_BYTES = 2 << 30
GOAL_OVER_LIBCACHESIM = 3.0


class PeakWithoutServer(PeakMemory):
    """PeakMemory of this process tree but the S3Proxy this bench started (not part of what a job runs)."""

    def __init__(self, every_s: float = 0.05) -> None:
        super().__init__(every_s, skip=object_store.server_pids())


class _Said(logging.Handler):
    """Collects libs.table_io.device_pass's log lines (whether the profile fell back to Spark SQL)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--millions", type=float, default=5.0)
    parser.add_argument("--driver-memory", default="1g", help="Spark driver heap (local mode: the only JVM)")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--repeat", type=int, default=3, help="measured runs after the warm-up (median reported)")
    parser.add_argument("--spark-path", action="store_true", help="also time compute_trace_profile (slow)")
    parser.add_argument("--marginal-from", type=float, default=None, metavar="M",
                        help="also profile M million requests: the marginal rate from M to --millions")
    parser.add_argument("--libcachesim", action="store_true",
                        help="also time libCacheSim's TraceAnalyzer on the same requests")
    parser.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)   # the child: load the traces
    object_store.add_option(parser)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    tmp = Path(args.workdir or tempfile.mkdtemp(prefix="bench-profile-"))
    tmp.mkdir(parents=True, exist_ok=True)
    # The child of --prepare is given the parent's warehouse and S3 settings (its environment): it starts no server.
    with object_store.warehouse(args.warehouse, tmp) as wh:
        code = run(args, tmp, wh)
    if not args.workdir and not args.prepare:
        shutil.rmtree(tmp, ignore_errors=True)
    return code


def run(args: argparse.Namespace, tmp: Path, wh: object_store.Warehouse) -> int:
    from heat import load, make_requests  # bench/heat.py

    from blockheat.libs.io.jvm import LEAN_DRIVER_OPTIONS
    from blockheat.libs.io.session import SparkConfig, build_session
    from blockheat.libs.io.tables import read_table, replace_rows
    from blockheat.libs.table_io.profile import profile_trace
    from blockheat.libs.transforms.profile import compute_trace_profile

    # the driver's JVM flags of `blockheat profile` in local mode (SparkConfig.from_env, lean_local)
    cfg = SparkConfig(master="local[2]", warehouse=wh.location, app_name="bench-profile",
                      extra={"spark.ui.showConsoleProgress": "false", "spark.driver.memory": args.driver_memory,
                             "spark.driver.extraJavaOptions": " ".join(LEAN_DRIVER_OPTIONS)})
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    n = int(args.millions * 1_000_000)
    m = int(args.marginal_from * 1_000_000) if args.marginal_from else None
    traces = (("warm", 200_000), ("bench", n), *((("base", m),) if m else ()))
    if args.prepare:
        spark = build_session(cfg)
        spans = {}
        for trace_id, count in traces:
            table = make_requests(count, trace_id)
            load(spark, cfg, table, trace_id, tmp)
            spans[trace_id] = int(table["ts_us"][-1].as_py())
            if args.libcachesim and trace_id != "warm":
                libcachesim_csv(table, tmp / f"{trace_id}.csv")
        (tmp / "spans.json").write_text(json.dumps(spans))
        spark.stop()
        return 0
    subprocess.run([sys.executable, __file__, "--prepare", "--millions", str(args.millions), "--workdir", str(tmp),
                    "--driver-memory", args.driver_memory, "--warehouse", str(wh.location),
                    *(["--marginal-from", str(args.marginal_from)] if m else []),
                    *(["--libcachesim"] if args.libcachesim else [])], check=True)
    spans = json.loads((tmp / "spans.json").read_text())
    spark = build_session(cfg)
    said, logger = _Said(), logging.getLogger("blockheat.libs.table_io.device_pass")
    logger.addHandler(said)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    span = spans["warm"]
    profile_trace(spark, cfg.warehouse, "warm", span_us=span, full=True)
    span = spans["bench"]
    times, peak, parts, pss = [], 0, {}, 0
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        rows = profile_trace(spark, cfg.warehouse, "bench", span_us=span, full=True)
        times.append(time.perf_counter() - t0)
    for _ in range(args.repeat):   # memory from runs of their own: the sampler's CPU is left out of the times
        with PeakWithoutServer() as mem:
            profile_trace(spark, cfg.warehouse, "bench", span_us=span, full=True)
        if mem.peak > peak:
            peak, parts = mem.peak, mem.peak_parts
        pss = max(pss, mem.peak_pss)
    base_times = []
    for _ in range(args.repeat if m else 0):
        t0 = time.perf_counter()
        profile_trace(spark, cfg.warehouse, "base", span_us=spans["base"], full=True)
        base_times.append(time.perf_counter() - t0)
    logger.removeHandler(said)
    fallback = [line for line in said.lines if "through Spark SQL" in line]
    elapsed = statistics.median(times)
    print(f"requests: {n:,}; profile rows written: {rows:,}; runs: "
          + ", ".join(f"{t:.2f} s ({n / t / 1e6:.2f} M req/s)" for t in times))
    print(f"blockheat profile : {n / elapsed / 1e6:6.3f} M req/s (median of {len(times)} runs, {elapsed:.1f} s); "
          f"ratio to the 1.3 M req/s goal: {n / elapsed / GOAL_RPS:.2f}; warehouse {wh.label}"
          + (f"; FELL BACK to Spark SQL: {fallback[0]}" if fallback else ""))
    print(f"peak memory (driver + JVM + workers, resident sizes summed): {peak / 2**30:.2f} GiB ({parts_text(parts)}); "
          f"ratio to the 2 GiB goal: {peak / GOAL_BYTES:.2f}; proportional set sizes (the workers' pages shared "
          f"with their daemon counted once): {pss / 2**30:.2f} GiB")
    ours = rate(n, times, m, base_times, "blockheat profile")
    if args.libcachesim:
        theirs = rate(n, [analyze(tmp / "bench.csv", tmp / "lcs") for _ in range(args.repeat)], m,
                      [analyze(tmp / "base.csv", tmp / "lcs") for _ in range(args.repeat if m else 0)],
                      "libCacheSim TraceAnalyzer")
        print(f"blockheat over libCacheSim's TraceAnalyzer: {ours / theirs:.2f}x "
              f"({'marginal' if m else 'whole runs'}; goal {GOAL_OVER_LIBCACHESIM:g}x)")
    if args.spark_path:
        direct = {tuple(r[:5]): r[5] for r in read_table(spark, cfg.warehouse, "trace_profile", "bench").select(
            "scope", "device", "window_start_us", "window_us", "metric", "value").collect()}
        with PeakWithoutServer() as mem:
            t0 = time.perf_counter()
            persisted: list = []
            profile = compute_trace_profile(read_table(spark, cfg.warehouse, "requests", "bench"), span_us=span,
                                            persisted=persisted)
            replace_rows(profile, spark, cfg.warehouse, "trace_profile", {"trace_id": "bench"})
            for df in persisted:
                df.unpersist()
            slow = time.perf_counter() - t0
        other = {tuple(r[:5]): r[5] for r in read_table(spark, cfg.warehouse, "trace_profile", "bench").select(
            "scope", "device", "window_start_us", "window_us", "metric", "value").collect()}
        same = direct.keys() == other.keys() and all(
            (a is None and other[k] is None) or (a is not None and other[k] is not None
                                                 and abs(a - other[k]) <= 1e-9 * max(abs(a), abs(other[k])))
            for k, a in direct.items())
        print(f"DataFrame path    : {n / slow / 1e6:6.3f} M req/s ({slow:.1f} s, peak {mem.peak / 2**30:.2f} GiB); "
              f"files path {slow / elapsed:.1f}x faster; same rows: {same}")
        if not same:
            raise SystemExit("the two profile paths disagree")
    spark.stop()
    return 0


def libcachesim_csv(table, path: Path) -> None:  # type: ignore[no-untyped-def]
    """The requests as libCacheSim's CSV: time (s), object id (the 512-byte block, device d's blocks from d << 40),
    size (bytes); no header."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    device = pc.cast(table["device"], pa.int64())
    out = pa.table({"t": pc.divide(table["ts_us"], 1_000_000),
                    "id": pc.add(pc.shift_left(device, 40), pc.divide(table["offset_bytes"], 512)),
                    "size": table["size_bytes"]})
    pcsv.write_csv(out, path, pcsv.WriteOptions(include_header=False))


def analyze(path: Path, out: Path) -> float:
    """Seconds libCacheSim's TraceAnalyzer takes over a CSV of libcachesim_csv(), default analyses and windows."""
    import libcachesim as lcs

    out.mkdir(parents=True, exist_ok=True)
    param = lcs.ReaderInitParam(has_header=False, has_header_set=True, delimiter=",", obj_id_is_num=True,
                                obj_id_is_num_set=True)
    param.time_field, param.obj_id_field, param.obj_size_field = 1, 2, 3
    here = os.getcwd()
    os.chdir(out)                                   # it writes its `stat` file into the working directory
    try:
        t0 = time.perf_counter()
        reader = lcs.TraceReader(str(path), lcs.TraceType.CSV_TRACE, param)
        lcs.TraceAnalyzer(reader, str(out / path.stem), lcs.AnalysisParam(), lcs.AnalysisOption()).run()
        return time.perf_counter() - t0
    finally:
        os.chdir(here)


if __name__ == "__main__":
    raise SystemExit(main())
