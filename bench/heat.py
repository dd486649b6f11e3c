"""Heat benchmark: blockheat's extent heat + temperature job against DuckDB computing the same
aggregation on the same Parquet files, in one run on local[2].

    .venv/bin/python bench/heat.py --millions 5

Generated trace: N million requests on 8 devices over one day, skewed offsets, 0.5-64 KiB sizes
(some cross 1 MiB extent boundaries). blockheat reads the `requests` Delta table and writes
`extent_heat` (1 MiB extents, 1 h windows); DuckDB reads the Delta table's Parquet files and writes
Parquet. Both get a warm-up run on 200,000 requests first. The results are compared row for row
(DuckDB reads both outputs and checks the symmetric difference is empty). Prints both rates and the
ratio (goal >= 0.2).

--warehouse s3a://bucket/prefix keeps blockheat's tables on an object store (S3Proxy started on loopback by the
bench when AWS_ENDPOINT_URL is not set, bench/object_store.py); DuckDB then reads a local copy of the same
`requests` files (copied before the timed runs) and writes locally, and the check reads a local copy of
blockheat's result.

--job times what `blockheat heat TRACE --full` runs (jobs.extent_heat.run: one compiled pass per device over the
`requests` files, extent_heat for the hour windows and the whole trace, disk_heat for its three layouts, the
commits), in this process on a warm local[2] session with the command's driver JVM flags, on generated traces of
--marginal-from M and --millions N million requests (loaded by a child process), against DuckDB's query above on
the same files, alternating --repeat times; prints each one's marginal rate from M to N requests and their ratio
(goal >= 2), and checks that both give the same hour-window rows of the N-request trace. The job computes more than
DuckDB's query (the whole-trace rows, disk heat), so the ratio is conservative.

    .venv/bin/python bench/heat.py --job --millions 20 --marginal-from 2
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import marginal  # (bench/marginal.py, next to this script)
import object_store  # (bench/object_store.py, next to this script)

EXTENT = 1 << 20
WINDOW_US = 3_600_000_000
JOB_GOAL = 2.0          # --job: the command's marginal rate over DuckDB's


def make_requests(n: int, trace_id: str, seed: int = 5) -> pa.Table:
    """n requests with the `requests` schema: 8 devices, one day, Zipf-like hot extents."""
    from blockheat.schemas import requests as R

    rng = np.random.default_rng(seed)
    ts = np.sort(rng.integers(0, 86_400_000_000, n))
    hot = rng.zipf(1.3, n) % 65_536                       # extent popularity
    offset = hot * EXTENT + rng.integers(0, 2048, n) * 512
    size = rng.choice(np.array([512, 4096, 8192, 16384, 65536]), n)
    return pa.table({
        "trace_id": pa.array([trace_id] * n), "device": pa.array(rng.integers(0, 8, n).astype(str)),
        "seq": pa.array(np.arange(n, dtype=np.int64)), "ts_us": pa.array(ts),
        "op": pa.array(np.where(rng.random(n) < 0.4, "R", "W")), "offset_bytes": pa.array(offset.astype(np.int64)),
        "size_bytes": pa.array(size.astype(np.int64)), "response_us": pa.nulls(n, pa.float64()),
        "queue_us": pa.nulls(n, pa.float64()), "source_file": pa.array(["generated"] * n),
    }, schema=R.ARROW_SCHEMA)


def load(spark, cfg, table: pa.Table, trace_id: str, tmp: Path) -> None:  # type: ignore[no-untyped-def]
    """The generated requests as the trace's `requests` rows, and its `traces` catalog row (the jobs read it)."""
    import datetime

    import pyarrow.compute as pc

    from blockheat.libs.io.delta_files import replace_from_driver
    from blockheat.libs.io.tables import replace_trace, table_target
    from blockheat.schemas import traces

    staged = tmp / f"{trace_id}.parquet"
    pq.write_table(table, staged)
    replace_trace(spark.read.parquet(str(staged)), spark, cfg.warehouse, "requests", trace_id)
    read = pc.equal(table["op"], "R")
    size = table["size_bytes"]
    reads = int(pc.sum(read).as_py() or 0)
    bytes_read = int(pc.sum(pc.if_else(read, size, 0)).as_py() or 0)
    row = {"trace_id": trace_id, "format": "generated", "source_files": [],
           "span_us": int(pc.max(table["ts_us"]).as_py()), "devices": sorted(pc.unique(table["device"]).to_pylist()),
           "records_read": table.num_rows,
           "records_accepted": table.num_rows, "records_rejected": 0, "rejected_by_reason": [], "reads": reads,
           "writes": table.num_rows - reads, "bytes_read": bytes_read,
           "bytes_written": int(pc.sum(size).as_py()) - bytes_read, "ingested_at": datetime.datetime.now(datetime.UTC),
           "options": [], "geometry": []}
    replace_from_driver(spark, table_target(spark, cfg.warehouse, traces.TABLE), {"trace_id": trace_id},
                        pa.Table.from_pylist([row], schema=traces.ARROW_SCHEMA))


def blockheat_heat(spark, cfg, trace_id: str, span_us: int) -> float:  # type: ignore[no-untyped-def]
    from blockheat.libs.io.tables import read_table, replace_rows
    from blockheat.libs.transforms.heat import compute_extent_heat

    t0 = time.perf_counter()
    heat = compute_extent_heat(read_table(spark, cfg.warehouse, "requests", trace_id), extent_bytes=EXTENT,
                               window_us=WINDOW_US, span_us=span_us)
    replace_rows(heat, spark, cfg.warehouse, "extent_heat",
                 {"trace_id": trace_id, "extent_bytes": EXTENT, "window_us": WINDOW_US})
    return time.perf_counter() - t0


DUCKDB_SQL = """
COPY (
  WITH pieces AS (
    SELECT device, op, ts_us, offset_bytes AS lo, offset_bytes + size_bytes AS hi,
           unnest(generate_series(offset_bytes // {E}, (offset_bytes + size_bytes - 1) // {E})) AS extent_id
    FROM read_parquet('{files}', hive_partitioning = true, hive_types_autocast = false) WHERE trace_id = '{trace}'
  ), clipped AS (
    SELECT device, op, ts_us, extent_id, greatest(lo, extent_id * {E}) AS plo, least(hi, (extent_id + 1) * {E}) AS phi
    FROM pieces
  )
  SELECT device, extent_id, (ts_us // {W}) * {W} AS window_start_us, count(*) AS requests,
         count(*) FILTER (op = 'R') AS reads, count(*) FILTER (op = 'W') AS writes,
         sum((phi + 511) // 512 - plo // 512) AS blocks, sum(phi - plo) AS bytes,
         sum((phi + 511) // 512 - plo // 512) / {WS} AS heat,
         sum((phi + 511) // 512 - plo // 512) / {WS} / {EB} AS temperature
  FROM clipped GROUP BY ALL
) TO '{out}' (FORMAT parquet)
"""


def duckdb_heat(con, files: str, trace_id: str, out: Path) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    con.execute(DUCKDB_SQL.format(E=EXTENT, W=WINDOW_US, WS=WINDOW_US / 1e6, EB=EXTENT // 512, files=files,
                                  trace=trace_id, out=out))
    return time.perf_counter() - t0


def reference_files(spark, wh: object_store.Warehouse, trace_id: str, tmp: Path) -> str:  # type: ignore[no-untyped-def]
    """The glob DuckDB reads the trace's `requests` files by: in a local warehouse, the table's own files; in an
    object-store one, a local copy of the table's current files for the trace (same partition directories)."""
    from blockheat.libs.io.tables import read_table

    if wh.local:
        return f"{wh.location}/requests/trace_id={trace_id}/**/*.parquet"
    copy = tmp / "reference"
    object_store.local_copy(read_table(spark, wh.location, "requests", trace_id).inputFiles(), wh.location, copy)
    return f"{copy}/requests/trace_id={trace_id}/**/*.parquet"


def same_numbers(spark, con, wh: object_store.Warehouse, trace_id: str,  # type: ignore[no-untyped-def]
                 duck_out: Path, tmp: Path) -> tuple[int, int]:
    """Rows in one result and not the other (0 = identical; heat compared to 1e-9 relative)."""
    from urllib.parse import unquote, urlparse

    from blockheat.libs.io.tables import read_table

    # The table's current files only: replaced files stay on disk until VACUUM.
    files = read_table(spark, wh.location, "extent_heat").inputFiles()
    if wh.local:
        current = [unquote(urlparse(f).path) for f in files]
    else:                                              # DuckDB reads local files: a copy of them
        copy = tmp / f"check-{trace_id}"
        shutil.rmtree(copy, ignore_errors=True)
        current = [str(p) for p in object_store.local_copy(files, wh.location, copy)]
    ours = "[" + ", ".join(f"'{f}'" for f in current) + "]"
    cols = "device, extent_id, window_start_us, requests, reads, writes, blocks, bytes"
    q = f"""
      WITH a AS (SELECT {cols}, round(heat, 9) h, round(temperature * 1e9, 9) t FROM read_parquet({ours},
                 hive_partitioning = true, hive_types_autocast = false)
                 WHERE trace_id = '{trace_id}' AND window_us = {WINDOW_US}),
           b AS (SELECT {cols}, round(heat, 9) h, round(temperature * 1e9, 9) t FROM read_parquet('{duck_out}'))
      SELECT (SELECT count(*) FROM (SELECT * FROM a EXCEPT ALL SELECT * FROM b))
           + (SELECT count(*) FROM (SELECT * FROM b EXCEPT ALL SELECT * FROM a)), (SELECT count(*) FROM a)"""
    diff, rows = con.execute(q).fetchone()
    return int(diff), int(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--millions", type=float, default=5.0)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each engine, alternating (median)")
    marginal.add_job_options(parser, "heat", "DuckDB")
    object_store.add_option(parser)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    tmp = Path(args.workdir or tempfile.mkdtemp(prefix="bench-heat-"))
    tmp.mkdir(parents=True, exist_ok=True)
    if args.prepare_job:
        load_job_traces(args, tmp, "bench-heat-load")
        return 0
    if args.job:
        code = run_job(args, tmp)
    else:
        with object_store.warehouse(args.warehouse, tmp) as wh:
            code = run(args, tmp, wh)
    if not args.workdir:
        shutil.rmtree(tmp, ignore_errors=True)
    return code


def load_job_traces(args: argparse.Namespace, work: Path, app_name: str) -> None:
    """The --prepare-job child of a --job bench (this one's, bench/graph.py's): marginal.job_traces' traces
    generated and loaded into work/warehouse."""
    from blockheat.libs.io.session import SparkConfig, build_session

    cfg = SparkConfig(master="local[2]", warehouse=work / "warehouse", app_name=app_name,
                      extra={"spark.ui.showConsoleProgress": "false"})
    spark = build_session(cfg)
    for trace_id, count in marginal.job_traces(args).items():
        load(spark, cfg, make_requests(count, trace_id), trace_id, work)
    spark.stop()


def job_heat(spark, cfg, trace_id: str) -> float:  # type: ignore[no-untyped-def]
    """Seconds of `blockheat heat TRACE --full` (its run, on this session)."""
    from blockheat.jobs.extent_heat import HeatConfig
    from blockheat.jobs.extent_heat import run as heat_run

    start = time.perf_counter()
    heat_run(spark, cfg, HeatConfig(trace_id, extent_bytes=EXTENT, window_us=WINDOW_US), full=True)
    return time.perf_counter() - start


def run_job(args: argparse.Namespace, tmp: Path) -> int:
    """--job: the command's marginal rate against DuckDB's (see the module docstring)."""
    import duckdb

    from blockheat.libs.io.jvm import LEAN_DRIVER_OPTIONS
    from blockheat.libs.io.session import SparkConfig, build_session

    traces = marginal.prepare(__file__, args, tmp)
    wh = object_store.Warehouse(tmp / "warehouse", f"local {tmp / 'warehouse'}")
    # the driver's JVM flags of `blockheat heat` in local mode (SparkConfig.from_env, lean_local)
    cfg = SparkConfig(master="local[2]", warehouse=wh.location, app_name="bench-heat-job",
                      extra={"spark.ui.showConsoleProgress": "false",
                             "spark.driver.extraJavaOptions": " ".join(LEAN_DRIVER_OPTIONS)})
    spark = build_session(cfg)
    con = duckdb.connect()
    con.execute("SET threads = 2")
    files = {trace: reference_files(spark, wh, trace, tmp) for trace in traces}
    duckdb_heat(con, files["warm"], "warm", tmp / "duck-warm.parquet")           # warm-ups
    job_heat(spark, cfg, "warm")
    times: dict[str, dict[str, list[float]]] = {"DuckDB": {"base": [], "bench": []},
                                                "blockheat": {"base": [], "bench": []}}
    for _ in range(max(1, args.repeat)):
        for trace in ("base", "bench"):
            out = tmp / f"duck-{trace}.parquet"
            out.unlink(missing_ok=True)
            times["DuckDB"][trace].append(duckdb_heat(con, files[trace], trace, out))
            times["blockheat"][trace].append(job_heat(spark, cfg, trace))
    diff, rows = same_numbers(spark, con, wh, "bench", tmp / "duck-bench.parquet", tmp)
    spark.stop()
    if diff:
        print(f"MISMATCH: {diff} rows differ between the heat job and DuckDB")
        return 1
    rates = marginal.rates(times, traces, "extent heat")
    print(f"blockheat heat over DuckDB: {rates['blockheat'] / rates['DuckDB']:.2f}x (marginal; goal {JOB_GOAL:g}x); "
          f"the {traces['bench']:,}-request hour rows identical ({rows:,} rows)")
    return 0


def run(args: argparse.Namespace, tmp: Path, wh: object_store.Warehouse) -> int:
    import duckdb

    from blockheat.libs.io.session import SparkConfig, build_session

    cfg = SparkConfig(master="local[2]", warehouse=wh.location, app_name="bench-heat",
                      extra={"spark.ui.showConsoleProgress": "false"})
    spark = build_session(cfg)
    con = duckdb.connect()
    con.execute("SET threads = 2")
    n = int(args.millions * 1_000_000)
    duck_times: list[float] = []
    our_times: list[float] = []
    for trace_id, count in (("warm", 200_000), ("bench", n)):
        table = make_requests(count, trace_id)
        load(spark, cfg, table, trace_id, tmp)
        span = int(table["ts_us"][-1].as_py())
        files = reference_files(spark, wh, trace_id, tmp)
        duck_out = tmp / f"duck-{trace_id}.parquet"
        for _ in range(args.repeat if trace_id == "bench" else 1):
            duck_out.unlink(missing_ok=True)
            duck = duckdb_heat(con, files, trace_id, duck_out)
            ours = blockheat_heat(spark, cfg, trace_id, span)
            if trace_id == "bench":
                duck_times.append(duck)
                our_times.append(ours)
        diff, rows = same_numbers(spark, con, wh, trace_id, duck_out, tmp)
        if diff:
            print(f"MISMATCH: {diff} rows differ between blockheat and DuckDB ({trace_id})")
            return 1
    duck, ours = statistics.median(duck_times), statistics.median(our_times)
    print(f"requests: {n:,}; result rows (device x extent x hour): {rows:,}; identical in both engines; "
          f"warehouse {wh.label}")
    runs = ", ".join(f"{d:.2f} / {o:.2f}" for d, o in zip(duck_times, our_times, strict=True))
    print(f"runs (DuckDB / blockheat, s): {runs}")
    print(f"DuckDB    extent heat : {n / duck / 1e6:6.2f} M req/s ({duck:.2f} s, median of {len(duck_times)})")
    print(f"blockheat extent heat : {n / ours / 1e6:6.2f} M req/s ({ours:.2f} s, median of {len(our_times)})")
    print(f"ratio blockheat / DuckDB : {duck / ours:6.2f}  (goal >= 0.20); first runs only: "
          f"{duck_times[0] / our_times[0]:.2f}; warehouse {wh.label}")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
