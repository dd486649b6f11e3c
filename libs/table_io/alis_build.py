"""ALIS units, aged access graphs and runs of one trace into `reorg_units`, `access_graph`, `alis_runs` and
`alis_graphs`: the whole trace, from an interval on, or exactly one interval (the nightly chain), per device from
the `requests` files (libs.table_io.alis_graph) where it can, else with the Spark transforms of libs.alis.

Incremental like the aged heat counts: interval N ages interval N-1's pruned graph. A full build walks the
intervals from 0 and replaces the trace's rows; from_interval N reads interval N-1's graph from the table and
replaces intervals N and later only. interval_index N builds exactly interval N (see jobs/alis_graph.py).
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from blockheat.libs.alis.graph import (
    CHUNK_US,
    age_graph,
    budget_bytes,
    graph_refs,
    partitions_for,
    with_weight,
    write_edge_counts,
)
from blockheat.libs.alis.runs import write_graphs_and_runs
from blockheat.libs.alis.units import compute_reorg_units, extend_reorg_units, storage_used, unit_refs
from blockheat.libs.io import storage
from blockheat.libs.io.connect import parallelism
from blockheat.libs.io.session import SparkConfig
from blockheat.libs.io.tables import read_table, replace_rows, replace_trace
from blockheat.libs.io.task_parquet import scratch_dir
from blockheat.libs.table_io import alis_graph as graph_files
from blockheat.libs.table_io.alis_graph import graph_params
from blockheat.libs.table_io.device_pass import files_or_sql
from blockheat.schemas import access_graph, alis_graphs, alis_runs, reorg_units, requests
from blockheat.sim import ALIS_THRESHOLD as THRESHOLD
from blockheat.sim import DAY_US

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


class GraphParamsError(ValueError):
    """An incremental build asked for parameters other than those the stored graphs used."""


@dataclass(frozen=True)
class GraphOptions:
    """Parameters of `blockheat graph` (defaults: the paper's server settings)."""

    trace_id: str
    tau: int = 9
    f: float = 1.0
    beta: float = 0.8                 # 0.1 is the paper's PC setting
    interval_us: int = DAY_US
    unit_bytes: int = 0               # 0: one unit per request extent
    include_writes: bool = False
    graph_share: float = 0.005
    prefilter_min_refs: int = 0
    threshold: float = THRESHOLD
    min_run_length: int | None = None  # None: tau
    chunk_us: int = CHUNK_US
    from_interval: int = 0
    interval_index: int | None = None  # nightly: exactly this interval (see the module docstring)
    runs: bool = True                 # False: no runs found, alis_runs left alone (the nightly: alis_layout's)

    def __post_init__(self) -> None:
        if self.tau < 1:
            raise ValueError(f"tau must be >= 1, got {self.tau}")
        if not 0.0 <= self.f <= 1.0:
            raise ValueError(f"f must be in [0, 1], got {self.f}")
        if not 0.0 <= self.beta <= 1.0:
            raise ValueError(f"beta must be in [0, 1], got {self.beta}")
        if self.interval_us <= 0:
            raise ValueError(f"interval must be > 0, got {self.interval_us} us")
        if self.chunk_us <= 0:
            raise ValueError(f"chunk must be > 0, got {self.chunk_us} us")
        if self.unit_bytes < 0:
            raise ValueError(f"unit_bytes must be >= 0, got {self.unit_bytes}")
        if self.from_interval < 0:
            raise ValueError(f"from_interval must be >= 0, got {self.from_interval}")
        if self.interval_index is not None and (self.interval_index < 0 or self.from_interval):
            raise ValueError(f"interval_index must be >= 0 and excludes from_interval, got {self.interval_index} "
                             f"with from_interval {self.from_interval}")

    @property
    def min_length(self) -> int:
        return self.tau if self.min_run_length is None else self.min_run_length

    def params_row(self, intervals: int) -> dict[str, Any]:
        return {"trace_id": self.trace_id, "unit_bytes": self.unit_bytes, "interval_us": self.interval_us,
                "intervals": intervals, "tau": self.tau, "f": self.f, "beta": self.beta,
                "include_writes": self.include_writes, "graph_share": self.graph_share,
                "prefilter_min_refs": self.prefilter_min_refs, "chunk_us": self.chunk_us,
                "threshold": self.threshold, "min_run_length": self.min_length}


@dataclass(frozen=True)
class GraphSummary:
    """What a graph build wrote: per-device figures and the intervals built."""

    options: dict[str, Any]
    intervals: list[int]
    per_device: list[dict[str, Any]]


def _check_incremental(spark: SparkSession, cfg: SparkConfig, opts: GraphOptions) -> dict[str, Any]:
    stored = graph_params(spark, cfg.warehouse, opts.trace_id)
    wanted = opts.params_row(int(stored["intervals"]))
    differing = sorted(k for k in wanted if k not in ("trace_id", "intervals") and stored[k] != wanted[k])
    option = (f"--from-interval {opts.from_interval}" if opts.interval_index is None
              else f"--interval-index {opts.interval_index}")
    if differing:
        raise GraphParamsError(f"{option}: the stored graphs of {opts.trace_id} were "
                               f"built with other {', '.join(differing)}; rebuild from interval 0")
    return stored


def _requests_and_last_interval(spark: SparkSession, cfg: SparkConfig, trace: str,
                                interval_us: int) -> tuple[DataFrame, int, int]:
    """The trace's requests, their count and the index of the interval holding the last one (LookupError:
    none)."""
    reqs = read_table(spark, cfg.warehouse, requests.TABLE, trace)
    span = reqs.agg(F.max("ts_us").alias("last_us"), F.count(F.lit(1)).alias("n")).first()
    if span is None or not span["n"]:
        raise LookupError(f"trace {trace!r} has no requests (ingest it first)")
    return reqs, int(span["n"]), int(span["last_us"]) // interval_us


def run(spark: SparkSession, cfg: SparkConfig, opts: GraphOptions) -> GraphSummary:
    """Build units, graphs and runs; each table is replaced in one Delta commit (per interval with
    from_interval > 0)."""
    if opts.interval_index is not None:
        return run_interval(spark, cfg, opts, opts.interval_index)
    if not opts.from_interval and not opts.unit_bytes:
        return files_or_sql(lambda: _run_files(spark, cfg, opts, None), lambda: _run_sql(spark, cfg, opts),
                            f"alis graph {opts.trace_id}")
    return _run_sql(spark, cfg, opts)


def _run_sql(spark: SparkSession, cfg: SparkConfig, opts: GraphOptions) -> GraphSummary:
    """run through the Spark transforms (libs.alis): fixed-size units, --from-interval, or files that cannot be
    read directly."""
    trace = opts.trace_id
    reqs, n_requests, last = _requests_and_last_interval(spark, cfg, trace, opts.interval_us)
    if opts.from_interval > last:
        raise ValueError(f"--from-interval {opts.from_interval}: the trace's last interval is {last}")
    if opts.from_interval:
        _check_incremental(spark, cfg, opts)
        units = read_table(spark, cfg.warehouse, reorg_units.TABLE, trace)
    else:
        log.info("alis graph %s: reorganization units", trace)
        units = compute_reorg_units(reqs, unit_bytes=opts.unit_bytes).localCheckpoint()
        replace_trace(units, spark, cfg.warehouse, reorg_units.TABLE, trace)
    refs = unit_refs(reqs, units, unit_bytes=opts.unit_bytes, interval_us=opts.interval_us)
    chosen = (graph_refs(refs, include_writes=opts.include_writes, prefilter_min_refs=opts.prefilter_min_refs)
              .where(F.col("interval_id") >= opts.from_interval).localCheckpoint())
    budgets = budget_bytes(storage_used(reqs), share=opts.graph_share).localCheckpoint()
    log.info("alis graph %s: edges of intervals %d..%d", trace, opts.from_interval, last)
    # The task count follows the request count (a cheap upper bound for read references of request units).
    tasks = partitions_for(n_requests, cores=parallelism(spark))
    # The counts go to scratch Parquet written by the reduce tasks themselves (faster than a
    # localCheckpoint of tens of millions of edges), read once per interval below.
    with scratch_dir(cfg.warehouse, f"alis-graph-{trace}") as scratch:
        counts = write_edge_counts(chosen, storage.join(scratch, "counts"), tau=opts.tau, chunk_us=opts.chunk_us,
                                   partitions=tasks)
        return _graphs_and_runs(spark, cfg, opts, with_weight(counts, tau=opts.tau, f=opts.f),
                                units, chosen, budgets, last, scratch)


def _graphs_and_runs(spark: SparkSession, cfg: SparkConfig, opts: GraphOptions, raw: DataFrame, units: DataFrame,
                     chosen: DataFrame, budgets: DataFrame, last: int, scratch: str | Path) -> GraphSummary:
    """Age, prune and store the graphs of intervals from_interval..last from their raw weights (each
    pruned graph kept in scratch Parquet), find and store their runs, and the trace's alis_graphs row."""
    trace = opts.trace_id
    previous = None
    if opts.from_interval:
        previous = read_table(spark, cfg.warehouse, access_graph.TABLE, trace).where(
            F.col("interval_id") == opts.from_interval - 1)
    graphs, found, sizes = [], [], None
    for interval_id in range(opts.from_interval, last + 1):
        aged = age_graph(raw.where(F.col("interval_id") == interval_id), previous, beta=opts.beta)
        aged = aged.select("device", F.lit(interval_id).cast("long").alias("interval_id"), "src_unit", "dst_unit",
                           "weight")
        pruned, runs, sizes = _prune_and_find_runs(opts, aged, budgets, storage.join(scratch, f"graph-{interval_id}"))
        log.info("alis graph %s: interval %d of %d aged, pruned and its runs found", trace, interval_id, last)
        graphs.append(pruned)
        found.append(runs)
        previous = pruned
    built = reduce(lambda a, b: a.unionByName(b), graphs)
    runs = reduce(lambda a, b: a.unionByName(b), found)
    intervals = list(range(opts.from_interval, last + 1))
    if opts.from_interval:
        for interval_id in intervals:
            where = {"trace_id": trace, "interval_id": interval_id}
            replace_rows(built.where(F.col("interval_id") == interval_id), spark, cfg.warehouse,
                         access_graph.TABLE, where)
            if opts.runs:
                replace_rows(runs.where(F.col("interval_id") == interval_id), spark, cfg.warehouse, alis_runs.TABLE,
                             where)
    else:
        replace_trace(built, spark, cfg.warehouse, access_graph.TABLE, trace)
        if opts.runs:
            replace_trace(runs, spark, cfg.warehouse, alis_runs.TABLE, trace)
    params = spark.createDataFrame([opts.params_row(last + 1)], alis_graphs.SPARK_SCHEMA)
    replace_trace(params, spark, cfg.warehouse, alis_graphs.TABLE, trace)
    return GraphSummary(asdict(opts), intervals, _per_device(units, chosen, sizes, runs, budgets, last, opts.runs))


def _prune_and_find_runs(opts: GraphOptions, aged: DataFrame, budgets: DataFrame,
                         directory: str | Path) -> tuple[DataFrame, DataFrame, DataFrame]:
    """The aged graphs pruned to their budgets, their runs (none looked for without opts.runs) and sizes, from one
    pass (scratch Parquet under `directory`, kept until the caller's scratch directory goes)."""
    return write_graphs_and_runs(aged, budgets, str(directory), tau=opts.tau, f=opts.f, threshold=opts.threshold,
                                 min_length=opts.min_length, find=opts.runs)


def run_interval(spark: SparkSession, cfg: SparkConfig, opts: GraphOptions, n: int) -> GraphSummary:
    """Build exactly interval n from the stored interval n-1 (see the module docstring); replaces interval
    n's rows of access_graph and alis_runs, the trace's reorg_units (extended) and its alis_graphs row."""
    if not opts.unit_bytes:
        return files_or_sql(lambda: _run_files(spark, cfg, opts, n), lambda: _interval_sql(spark, cfg, opts, n),
                            f"alis graph {opts.trace_id} interval {n}")
    return _interval_sql(spark, cfg, opts, n)


def _interval_sql(spark: SparkSession, cfg: SparkConfig, opts: GraphOptions, n: int) -> GraphSummary:
    """run_interval through the Spark transforms (libs.alis)."""
    trace = opts.trace_id
    reqs, n_requests, data_last = _requests_and_last_interval(spark, cfg, trace, opts.interval_us)
    built_before = _interval_checks(spark, cfg, opts, n, data_last)
    end_us = (n + 1) * opts.interval_us
    upto = reqs.where(F.col("ts_us") < end_us)
    during = upto.where(F.col("ts_us") >= n * opts.interval_us)
    known = read_table(spark, cfg.warehouse, reorg_units.TABLE, trace) if n else None
    log.info("alis graph %s: units, edges and runs of interval %d", trace, n)
    units = extend_reorg_units(known, during, unit_bytes=opts.unit_bytes).localCheckpoint()
    replace_trace(units, spark, cfg.warehouse, reorg_units.TABLE, trace)
    refs = unit_refs(during, units, unit_bytes=opts.unit_bytes, interval_us=opts.interval_us)
    chosen = graph_refs(refs, include_writes=opts.include_writes,
                        prefilter_min_refs=opts.prefilter_min_refs).localCheckpoint()
    budgets = budget_bytes(storage_used(upto), share=opts.graph_share).localCheckpoint()
    tasks = partitions_for(n_requests, cores=parallelism(spark))
    with scratch_dir(cfg.warehouse, f"alis-graph-{trace}-{n}") as scratch:     # as in run()
        counts = write_edge_counts(chosen, storage.join(scratch, "counts"), tau=opts.tau, chunk_us=opts.chunk_us,
                                   partitions=tasks)
        return _interval_graph(spark, cfg, opts, n, with_weight(counts, tau=opts.tau, f=opts.f), units, chosen,
                               budgets, built_before, scratch)


def _interval_checks(spark: SparkSession, cfg: SparkConfig, opts: GraphOptions, n: int, data_last: int) -> int:
    """run_interval's checks (the data reaches interval n; interval n-1 was built with these parameters);
    returns the number of intervals stored before."""
    if n > data_last:
        raise ValueError(f"--interval-index {n}: the requests of {opts.trace_id} end in interval {data_last}; "
                         "ingest the later files first")
    if not n:
        return 0
    built_before = int(_check_incremental(spark, cfg, opts)["intervals"])
    if built_before < n:
        raise LookupError(f"--interval-index {n}: the stored graphs of {opts.trace_id} end at interval "
                          f"{built_before - 1}; build interval {n - 1} first")
    return built_before


def _run_files(spark: SparkSession, cfg: SparkConfig, opts: GraphOptions, n: int | None) -> GraphSummary:
    """run (n None: from interval 0) or run_interval(n) by one task per device reading the requests files
    (libs.table_io.alis_graph); Unsupported, before anything is written, when they cannot be read directly."""
    trace = opts.trace_id
    files = graph_files.request_files(spark, cfg.warehouse, trace)
    data_last = files.last_us // opts.interval_us
    if n is None:
        build, intervals = graph_files.Build(trace, 0, data_last, opts.interval_us), data_last + 1
    else:
        built_before = _interval_checks(spark, cfg, opts, n, data_last)
        build, intervals = graph_files.Build(trace, n, n, opts.interval_us, nightly=True), max(built_before, n + 1)
    log.info("alis graph %s: units, edges and runs of intervals %d..%d, one task per device", trace, build.first,
             build.last)
    per_device = graph_files.build(spark, cfg.warehouse, build, graph_files.params_of(opts), files)
    params = spark.createDataFrame([opts.params_row(intervals)], alis_graphs.SPARK_SCHEMA)
    replace_trace(params, spark, cfg.warehouse, alis_graphs.TABLE, trace)
    return GraphSummary(asdict(opts), list(range(build.first, build.last + 1)), per_device)


def _interval_graph(spark: SparkSession, cfg: SparkConfig, opts: GraphOptions, n: int, raw: DataFrame,
                    units: DataFrame, chosen: DataFrame, budgets: DataFrame, built_before: int,
                    scratch: Path) -> GraphSummary:
    """Interval n's graph from its raw weights and interval n-1's stored graph (the pruned graph kept in
    scratch Parquet); stores it, its runs and the alis_graphs row."""
    trace = opts.trace_id
    previous = None
    if n:
        previous = read_table(spark, cfg.warehouse, access_graph.TABLE, trace).where(
            F.col("interval_id") == n - 1).localCheckpoint()
    aged = age_graph(raw.where(F.col("interval_id") == n), previous, beta=opts.beta).select(
        "device", F.lit(n).cast("long").alias("interval_id"), "src_unit", "dst_unit", "weight")
    built, runs, sizes = _prune_and_find_runs(opts, aged, budgets, storage.join(scratch, "graph"))
    if n:
        where = {"trace_id": trace, "interval_id": n}
        replace_rows(built, spark, cfg.warehouse, access_graph.TABLE, where)
        if opts.runs:
            replace_rows(runs, spark, cfg.warehouse, alis_runs.TABLE, where)
    else:
        replace_trace(built, spark, cfg.warehouse, access_graph.TABLE, trace)
        if opts.runs:
            replace_trace(runs, spark, cfg.warehouse, alis_runs.TABLE, trace)
    params = spark.createDataFrame([opts.params_row(max(built_before, n + 1))], alis_graphs.SPARK_SCHEMA)
    replace_trace(params, spark, cfg.warehouse, alis_graphs.TABLE, trace)
    return GraphSummary(asdict(opts), [n], _per_device(units, chosen, sizes, runs, budgets, n, opts.runs))


def _per_device(units: DataFrame, refs: DataFrame, sizes: DataFrame, runs: DataFrame, budgets: DataFrame,
                last: int, with_runs: bool = True) -> list[dict[str, Any]]:
    """sizes: the last interval's graph sizes (libs.alis.graph.GRAPH_BYTES_DDL rows); without with_runs the run
    figures are None, as the files path gives them (the runs were not stored)."""
    by_device = [
        units.groupBy("device").agg(F.count(F.lit(1)).alias("units")),
        refs.groupBy("device").agg(F.count(F.lit(1)).alias("graph_refs")),
        sizes.where(F.col("interval_id") == last).select(
            "device", F.col("edges").alias("last_edges"), F.col("graph_bytes").alias("last_graph_bytes")),
        budgets,
    ]
    if with_runs:
        by_device.append(runs.groupBy("device").agg(
            F.countDistinct("interval_id", "run_id").alias("runs"),
            F.count_if(F.col("interval_id") == last).alias("last_run_units"),
            F.countDistinct(F.when(F.col("interval_id") == last, F.col("run_id"))).alias("last_runs")))
    joined = reduce(lambda a, b: a.join(b, on="device", how="left"), by_device)
    rows = [r.asDict() for r in joined.orderBy("device").collect()]
    for row in rows:
        for key in ("graph_refs", "last_edges", "last_graph_bytes", *(graph_files.RUN_STATS if with_runs else ())):
            row[key] = row[key] or 0
        if not with_runs:
            row.update(dict.fromkeys(graph_files.RUN_STATS))
    return rows


