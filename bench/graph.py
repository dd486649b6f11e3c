"""ALIS graph benchmark: the access-graph edge aggregation (libs.alis.graph.write_edge_counts) on a
generated trace of N million reads against a polars implementation of the same aggregation, in
one process on local[2]; then run discovery (sim.alis.runs.discover_runs) on a graph of at least
1 million edges.

    .venv/bin/python bench/graph.py --millions 5

Prints reads per second for both and the blockheat/polars ratio (goal >= 0.5), checks that both
give the same edges, and prints run discovery's edges per second (goal: under 60 s). Both build
engines get a warm-up run on a small trace first, then --repeat runs each at full size, alternating
(polars, Spark, polars, ...); the ratio is of the median times, and every run is printed (the
first Spark run at full size is the slowest: the JVM is still compiling that plan's code). Both
write their edges to Parquet: polars' sink, and in blockheat the reduce tasks themselves
(write_edge_counts, as jobs/alis_graph.py; --writer spark for Spark's writer instead).

blockheat writes its edges under the warehouse (<warehouse>/_bench/graph/). --warehouse s3a://bucket/prefix puts
them on an object store, and blockheat reads the references from a copy there (uploaded before the timed runs;
S3Proxy started on loopback by the bench when AWS_ENDPOINT_URL is not set, bench/object_store.py); polars keeps
reading and writing local files.

--job times what `blockheat graph TRACE --no-runs` runs (libs.table_io.alis_build.run: units, each device's pair
counts, weights, ageing, pruning, the three tables committed), in this process on a warm local[2] session, on
generated request traces (bench/heat.py's: 8 devices, one day, 40% reads) of --marginal-from M and --millions N
million requests, against polars building the same edges from the same `requests` files (each device's extents
numbered in (offset, size) order, its reads' pairs within tau counted per (src, dst)), both alternating --repeat
times; prints each one's marginal rate from M to N requests and their ratio (goal >= 2), and checks on the M-request
trace that polars' edges, weighed and aged as the job does (f = 1, beta = 0.8), are the job's graph row for row.

    .venv/bin/python bench/graph.py --job --millions 20 --marginal-from 2
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
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

TAU = 9
DAY_US = 86_400_000_000
KEYS = ["device", "interval_id", "src_unit", "dst_unit"]


def make_refs(path: Path, n: int, *, seed: int = 5, devices: int = 4, days: int = 2,
              n_units: int = 2_000_000, n_runs: int = 20_000, noise: float = 0.3) -> None:
    """n read references (unit_refs columns): repeated runs of 8..47 units (popularity Zipf 1.3),
    each on one device, 30% of the reads replaced by random units, neighbours shuffled a little
    (concurrent streams), timestamps uniform over `days` days."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(8, 48, n_runs)
    starts = rng.integers(0, n_units - 100, n_runs)
    run_device = rng.integers(0, devices, n_runs)
    picks = rng.zipf(1.3, size=n // 8 + 10) % n_runs
    picks = picks[: int(np.searchsorted(np.cumsum(lengths[picks]), n)) + 1]
    lens = lengths[picks]
    which = np.repeat(np.arange(len(picks)), lens)[:n]
    within = np.arange(n) - np.repeat(np.cumsum(lens) - lens, lens)[:n]
    units = starts[picks][which] + within * 2
    device = run_device[picks][which]
    noisy = rng.random(n) < noise
    units[noisy] = rng.integers(0, n_units, int(noisy.sum()))
    order = np.argsort(np.arange(n) + rng.integers(0, 16, n), kind="stable")
    units, device = units[order], device[order]
    ts = np.sort(rng.integers(0, days * DAY_US, n))
    names = np.array([f"d{i}" for i in range(devices)])
    pq.write_table(pa.table({
        "device": names[device], "interval_id": ts // DAY_US, "ts_us": ts, "seq": np.arange(n, dtype=np.int64),
        "sub": np.zeros(n, np.int32), "op": np.full(n, "R"), "unit_id": units.astype(np.int64),
    }), path)


def polars_pairs(ordered, tau: int):  # type: ignore[no-untyped-def]
    """(device, interval_id, src_unit, dst_unit, pairs, closeness) of reads ordered within (device, interval)."""
    import polars as pl

    parts = []
    for j in range(1, tau + 1):
        same = (pl.col("device") == pl.col("device").shift(j)) & (
            pl.col("interval_id") == pl.col("interval_id").shift(j))
        shifted = ordered.select("device", "interval_id", pl.col("unit_id").shift(j).alias("src_unit"),
                                 pl.col("unit_id").alias("dst_unit"), same.alias("same"))
        parts.append(shifted.filter(pl.col("same") & (pl.col("src_unit") != pl.col("dst_unit"))).select(
            *KEYS, pl.lit(tau - j + 1, pl.Int64).alias("closeness")))
    return (pl.concat(parts).group_by(KEYS)
            .agg(pl.len().cast(pl.Int64).alias("pairs"), pl.col("closeness").sum().alias("closeness")))


def polars_edges(refs: Path, out: Path, tau: int = TAU) -> float:
    """The same aggregation in polars: sort, shift by 1..tau within (device, interval), group."""
    import polars as pl

    start = time.perf_counter()
    ordered = (pl.scan_parquet(refs).select("device", "interval_id", "ts_us", "seq", "sub", "unit_id")
               .sort("device", "interval_id", "ts_us", "seq", "sub"))
    polars_pairs(ordered, tau).sink_parquet(out)
    return time.perf_counter() - start


def spark_edges(spark, refs: str, out: str, reads: int, tau: int = TAU, *,  # type: ignore[no-untyped-def]
                writer: str = "task") -> float:
    """writer "task": write_edge_counts, the reduce tasks write Parquet themselves (what alis_graph
    runs); "spark": build_edge_counts and Spark's own Parquet writer. refs, out: local paths or URIs."""
    from blockheat.libs.alis.graph import build_edge_counts, partitions_for, write_edge_counts
    from blockheat.libs.io import storage

    storage.delete_tree(out)
    start = time.perf_counter()
    reads_df, tasks = spark.read.parquet(str(refs)), partitions_for(reads, cores=2)
    if writer == "task":
        write_edge_counts(reads_df, str(out), tau=tau, partitions=tasks)
    else:
        build_edge_counts(reads_df, tau=tau, partitions=tasks).write.mode("overwrite").parquet(str(out))
    return time.perf_counter() - start


def same_edges(a: Path, b: str) -> int:
    """Both edge sets, sorted, compared column by column; returns the edge count."""
    tables = []
    for path in (a, b):
        t = object_store.read_parquet(path, columns=[*KEYS, "pairs", "closeness"])
        t = t.cast(pa.schema([pa.field("device", pa.string())] + [pa.field(c, pa.int64()) for c in t.column_names[1:]]))
        tables.append(t.sort_by([(k, "ascending") for k in KEYS]))
    for name in [*KEYS, "pairs", "closeness"]:
        if not tables[0].column(name).equals(tables[1].column(name)):
            raise AssertionError(f"edges differ in column {name}")
    return tables[0].num_rows


def run_discovery(edges: str) -> tuple[int, float, int]:
    """discover_runs on the largest (device, interval) graph: (edges, seconds, runs kept)."""
    from blockheat.sim import discover_runs

    t = object_store.read_parquet(edges)
    groups = (t.group_by(["device", "interval_id"]).aggregate([("pairs", "count")])
              .sort_by([("pairs_count", "descending")]))
    device, interval = groups.column("device")[0].as_py(), groups.column("interval_id")[0].as_py()
    g = t.filter((pa.compute.field("device") == device) & (pa.compute.field("interval_id") == interval))
    weight = g.column("closeness").to_numpy() / TAU  # f = 1
    start = time.perf_counter()
    runs = discover_runs(g.column("src_unit").to_numpy(), g.column("dst_unit").to_numpy(), weight, tau=TAU, f=1.0)
    return g.num_rows, time.perf_counter() - start, len(runs)


JOB_GOAL = 2.0
BETA = 0.8


def request_files(warehouse: Path, trace_id: str) -> str:
    return str(warehouse / "requests" / f"trace_id={trace_id}" / "**" / "*.parquet")


def polars_request_edges(files: str, out: Path, tau: int = TAU) -> float:
    """The job's edges in polars from a trace's `requests` files: each device's extents (offset, size) numbered in
    order from 0 over all its requests, its reads' pairs within tau (interval: the day) counted; seconds."""
    import polars as pl

    start = time.perf_counter()
    requests = pl.scan_parquet(files, hive_partitioning=True)
    units = requests.select(
        pl.col("device").cast(pl.String), (pl.col("ts_us") // DAY_US).alias("interval_id"), "ts_us", "seq",
        pl.col("op").cast(pl.String),
        (pl.struct("offset_bytes", "size_bytes").rank("dense").over("device") - 1).cast(pl.Int64).alias("unit_id"))
    reads = units.filter(pl.col("op") == "R").select("device", "interval_id", "ts_us", "seq",
                                                     pl.lit(0, pl.Int32).alias("sub"), "unit_id")
    edges = polars_pairs(reads.sort("device", "interval_id", "ts_us", "seq"), tau)
    edges.sink_parquet(out)
    return time.perf_counter() - start


def job_graph(spark, cfg, trace_id: str) -> float:  # type: ignore[no-untyped-def]
    """Seconds of `blockheat graph TRACE --no-runs` (its run, on this session)."""
    from blockheat.libs.table_io.alis_build import GraphOptions
    from blockheat.libs.table_io.alis_build import run as graph_run

    start = time.perf_counter()
    graph_run(spark, cfg, GraphOptions(trace_id, runs=False))
    return time.perf_counter() - start


def same_as_job(warehouse: Path, edges: Path) -> int:
    """polars' edges weighed and aged as the job's first interval (f = 1, beta = 0.8: 0.8 * (pairs * 0 +
    closeness / 9)) against the job's access_graph rows of the trace, sorted, column by column; the edge count."""
    import polars as pl
    from deltalake import DeltaTable

    trace = edges.stem.split("-")[-1]
    ours = pl.from_arrow(DeltaTable(str(warehouse / "access_graph")).to_pyarrow_table(
        filters=[("trace_id", "=", trace)], columns=["device", "interval_id", "src_unit", "dst_unit", "weight"]))
    theirs = pl.read_parquet(edges).select(
        *KEYS, ((pl.col("pairs").cast(pl.Float64) * 0.0 + pl.col("closeness").cast(pl.Float64) * (1.0 / TAU))
                * BETA).alias("weight"))
    ours = ours.with_columns(pl.col("device").cast(pl.String)).sort(KEYS)
    theirs = theirs.sort(KEYS)
    if ours.height != theirs.height or not all(ours[c].equals(theirs[c]) for c in [*KEYS, "weight"]):
        raise AssertionError(f"the job's graph of {trace} differs from polars' edges ({ours.height:,} against "
                             f"{theirs.height:,} edges)")
    return ours.height


def run_job(args: argparse.Namespace, work: Path) -> int:
    """--job: the command's marginal rate against polars' (see the module docstring)."""
    from blockheat.libs.io.session import SparkConfig, build_session

    traces = marginal.prepare(__file__, args, work)
    warehouse = work / "warehouse"
    cfg = SparkConfig(master="local[2]", warehouse=warehouse, app_name="bench-graph-job",
                      extra={"spark.ui.showConsoleProgress": "false"})
    spark = build_session(cfg)
    polars_request_edges(request_files(warehouse, "warm"), work / "edges-warm.parquet")      # warm-ups
    job_graph(spark, cfg, "warm")
    times: dict[str, dict[str, list[float]]] = {"polars": {"base": [], "bench": []},
                                                "blockheat": {"base": [], "bench": []}}
    for _ in range(max(1, args.repeat)):
        for trace in ("base", "bench"):
            times["polars"][trace].append(polars_request_edges(request_files(warehouse, trace),
                                                               work / f"edges-{trace}.parquet"))
            times["blockheat"][trace].append(job_graph(spark, cfg, trace))
    spark.stop()
    edges = same_as_job(warehouse, work / "edges-base.parquet")
    rates = marginal.rates(times, traces, "graph")
    print(f"blockheat graph over polars: {rates['blockheat'] / rates['polars']:.2f}x (marginal; goal {JOB_GOAL:g}x); "
          f"the {traces['base']:,}-request graphs identical ({edges:,} edges)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--millions", type=float, default=5.0, help="reads in the generated trace (millions)")
    parser.add_argument("--repeat", type=int, default=3, help="full-size runs of each engine (median taken)")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--writer", choices=("task", "spark"), default="task",
                        help="who writes the edges' Parquet: the reduce tasks (default, as alis_graph) or Spark")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark setting for the blockheat side (repeatable)")
    marginal.add_job_options(parser, "graph", "polars on request traces")
    object_store.add_option(parser)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["POLARS_MAX_THREADS"] = "2"          # the same two cores as local[2]
    work = args.workdir or Path(tempfile.mkdtemp(prefix="blockheat-bench-graph-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.prepare_job:
        from heat import load_job_traces  # bench/heat.py

        load_job_traces(args, work, "bench-graph-load")
        return 0
    if args.job:
        code = run_job(args, work)
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
        return code
    with object_store.warehouse(args.warehouse, work) as wh:
        code = run(args, work, wh)
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return code


def run(args: argparse.Namespace, work: Path, wh: object_store.Warehouse) -> int:
    from blockheat.libs.io import storage
    from blockheat.libs.io.session import SparkConfig, build_session

    n = int(args.millions * 1_000_000)
    refs, warm = work / "refs.parquet", work / "warm.parquet"
    t = time.perf_counter()
    make_refs(refs, n)
    make_refs(warm, 200_000, seed=9)
    print(f"generated {n:,} reads in {time.perf_counter() - t:.1f} s", flush=True)

    print(f"warehouse: {wh.label}", flush=True)
    cfg = SparkConfig(master="local[2]", warehouse=wh.location, app_name="bench-graph",
                      extra={"spark.ui.showConsoleProgress": "false", **dict(kv.split("=", 1) for kv in args.conf)})
    spark = build_session(cfg)
    ours_dir = wh.join("_bench", "graph")
    if wh.local:                                       # blockheat reads the same local files as polars
        our_refs, our_warm = str(refs), str(warm)
    else:                                              # a copy on the object store
        our_refs, our_warm = storage.join(ours_dir, refs.name), storage.join(ours_dir, warm.name)
        object_store.upload(refs, our_refs)
        object_store.upload(warm, our_warm)
    polars_edges(warm, work / "warm-polars.parquet")                  # warm-ups
    spark_edges(spark, our_warm, storage.join(ours_dir, "warm-spark"), 200_000, writer=args.writer)

    refs_s, ours_s = [], []
    our_edges = storage.join(ours_dir, "spark")
    for _ in range(max(1, args.repeat)):
        refs_s.append(polars_edges(refs, work / "polars.parquet"))
        ours_s.append(spark_edges(spark, our_refs, our_edges, n, writer=args.writer))
    edges = same_edges(work / "polars.parquet", our_edges)
    ref, ours = float(np.median(refs_s)), float(np.median(ours_s))
    import polars

    runs = lambda times: ", ".join(f"{t:.1f}" for t in times)  # noqa: E731
    print(f"polars {polars.__version__} edges   : {n / ref / 1e6:6.2f} M reads/s "
          f"(median {ref:.1f} s of {runs(refs_s)})")
    print(f"blockheat edges ({args.writer:5s}) : {n / ours / 1e6:6.2f} M reads/s "
          f"(median {ours:.1f} s of {runs(ours_s)})")
    print(f"ratio blockheat / polars: {ref / ours:6.2f}  (goal >= 0.50; first runs only: {refs_s[0] / ours_s[0]:.2f}); "
          f"{edges:,} edges, identical; warehouse {wh.label}")
    spark.stop()
    m, seconds, kept = run_discovery(our_edges)
    print(f"run discovery           : {m:,} edges in {seconds:.1f} s = {m / seconds / 1e6:.2f} M edges/s, "
          f"{kept:,} runs kept (goal: >= 1M edges under 60 s)")
    storage.delete_tree(ours_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
