"""Spark application: the policy scorecard of one trace and window (`policy_scores`): every variant of the
registered policy families (libs.plans.policies) replayed on the trace's array by the Spark simulator stage
(libs.simulation.stage, one partition per distinct scenario; figures also in sim_results under the sweep's
grid_id), ranked against the as-traced baseline."""
from __future__ import annotations

import argparse
import hashlib
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark.sql import functions as F

from blockheat.libs.io import storage
from blockheat.libs.io.session import SparkConfig, build_session
from blockheat.libs.io.table_versions import table_version
from blockheat.libs.io.tables import read_table, replace_rows, trace_info, trace_rows
from blockheat.libs.plans.policies import COOLING_EVERY_S, PENDING_FAMILIES, SweepOptions, families
from blockheat.libs.plans.scorecard import Window, check_window, parse_window, score_rows, sweep_scenarios
from blockheat.libs.plans.target_spec import resolve_spec, spec_param
from blockheat.libs.plans.types import PolicyError, Target, WindowStats
from blockheat.libs.simulation.grid import parse_grid
from blockheat.libs.simulation.stage import TableFiles, table_files
from blockheat.libs.simulation.stage import run as simulate
from blockheat.libs.table_io.device_pass import spark_tasks
from blockheat.schemas import policy_scores as PS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

ARRAY_GROUP = "all"
#: The tables a sweep reads (their Delta versions are what a plan built on the scores depends on).
INPUT_TABLES = ("traces", "requests")


@dataclass(frozen=True)
class ScoreConfig:
    """One sweep: trace, window ("all" or START:END seconds), disk spec (None: built from the trace's recorded
    geometry), queue discipline, speed-up, seed, families (None: all registered) and their grids."""

    trace_id: str
    window: str = "all"
    spec: str | None = None
    scheduler: str = "clook"
    speedup: float = 1.0
    seed: int = 1
    families: tuple[str, ...] | None = None
    sweep: SweepOptions = field(default_factory=SweepOptions)

    def __post_init__(self) -> None:
        if not (self.speedup > 0 and math.isfinite(self.speedup)):
            raise PolicyError(f"speedup must be a positive number, got {self.speedup}")


@dataclass(frozen=True)
class ScoreSummary:
    grid_id: str
    window: Window
    rows: list[dict[str, Any]]              # policy_scores rows, best first
    pending: dict[str, str]                 # families not available yet -> why
    tables: dict[str, int]                  # the Delta versions read
    skipped: dict[str, str] = field(default_factory=dict)    # families not applicable to this target -> why


def grid_id_for(trace_id: str, window_id: str) -> str:
    """`score.<trace>.<window>` (a SHA-256 prefix in place of the names when that would pass 128 characters)."""
    gid = f"score.{trace_id}.{window_id}"
    return gid if len(gid) <= 128 else f"score.{hashlib.sha256(gid.encode()).hexdigest()[:40]}"


def device_figures(requests: DataFrame, window: Window) -> list[dict[str, Any]]:
    """Per device of the trace's requests: {"device", "end": the highest byte its requests address, "n": its
    requests in the window, "bytes": their bytes}, in one Spark pass."""
    inside = (F.col("ts_us") >= window.start_us) & (F.col("ts_us") < window.end_us)
    return [r.asDict() for r in requests.groupBy("device").agg(
        F.max(F.col("offset_bytes") + F.col("size_bytes")).alias("end"), F.count_if(inside).alias("n"),
        F.sum(F.when(inside, F.col("size_bytes")).otherwise(0)).alias("bytes")).collect()]


def _figures_task(files: list[tuple[str, list[str]]], window: Window) -> Any:
    def run(ids: Any) -> Any:
        for i in ids:
            device, paths = files[i]
            end = n = size_sum = 0
            for path in paths:
                t = storage.read_parquet(path, columns=["ts_us", "offset_bytes", "size_bytes"])
                ts, off, size = (t.column(c).to_numpy() for c in ("ts_us", "offset_bytes", "size_bytes"))
                if len(ts):
                    end = max(end, int((off + size).max()))
                    inside = (ts >= window.start_us) & (ts < window.end_us)
                    n += int(np.count_nonzero(inside))
                    size_sum += int(size[inside].sum())
            yield {"device": device, "end": end, "n": n, "bytes": size_sum}

    return run


def device_figures_files(spark: SparkSession, files: Mapping[str, list[str]], window: Window
                         ) -> list[dict[str, Any]]:
    """device_figures from the `requests` table's files (device -> its files): one task per device."""
    listed = sorted(files.items())
    return spark_tasks(spark, len(listed), _figures_task(listed, window))


def sizes_and_stats(rows: Sequence[Mapping[str, Any]], window: Window, devices: Sequence[str], sector_bytes: int,
                    span_us: int) -> tuple[tuple[int, ...], WindowStats]:
    """From device_figures' rows: each device's size (the highest byte its requests address over the whole
    trace, in the spec's sectors) and the window's statistics (requests, mean size overall and per device;
    length: the window clipped to the trace)."""
    ends = {str(r["device"]): int(r["end"]) for r in rows}
    sizes = tuple(max(1, -(-ends.get(d, 0) // sector_bytes)) for d in devices)
    used = [r for r in rows if r["n"]]
    n = sum(int(r["n"]) for r in used)
    if n == 0:
        raise PolicyError(f"window {window.window_id} has no requests")
    length_us = min(window.end_us, int(span_us) + 1) - window.start_us
    return sizes, WindowStats(length_us / 1e6, n, sum(int(r["bytes"]) for r in used) / n,
                              {str(r["device"]): int(r["bytes"]) / int(r["n"]) for r in used})


def run(spark: SparkSession, cfg: SparkConfig, job: ScoreConfig) -> ScoreSummary:
    """Replaces the (trace, window) rows of policy_scores (and the sweep's grid in sim_results); returns them."""
    tables = {t: table_version(cfg.warehouse, t) for t in INPUT_TABLES}
    info = trace_info(spark, cfg.warehouse, job.trace_id)
    window = parse_window(job.window, span_us=int(info["span_us"]))
    devices = tuple(sorted(str(d) for d in info["devices"]))
    param = spec_param(info, devices, job.spec)
    spec = resolve_spec(param)
    requests = read_table(spark, cfg.warehouse, "requests", job.trace_id, version=tables["requests"])
    windowed = requests.where((F.col("ts_us") >= window.start_us) & (F.col("ts_us") < window.end_us))
    files = table_files(spark, cfg.warehouse, [job.trace_id], tables["requests"])
    figures = (device_figures(requests, window) if files is None else
               device_figures_files(spark, {d: paths for (_, d), paths in files.items()}, window))
    sizes, stats = sizes_and_stats(figures, window, devices, spec.sector_size, int(info["span_us"]))
    target = Target(job.trace_id, devices, sizes, spec, param, job.scheduler, job.speedup, job.seed)
    variants, skipped = [], {}
    for family in families(job.families):
        why = family.why_not(target, stats, job.sweep)
        if why is None:
            variants += family.variants(target, stats, job.sweep)
        else:
            skipped[family.name] = why
    scenarios, scenario_of = sweep_scenarios(variants, target)
    grid_id = grid_id_for(job.trace_id, window.window_id)
    grid = parse_grid({"grid_id": grid_id, "traces": [job.trace_id], "array_groups": ARRAY_GROUP,
                       "description": f"policy scorecard of {job.trace_id}, window {window.window_id}",
                       "scenarios": [{"scenario_id": sid, **s} for sid, s in scenarios]},
                      source=f"policy sweep of trace {job.trace_id!r} window {window.window_id}")
    log.info("policy scores %s window %s: %d variants, %d scenarios on %d disks of %s", job.trace_id,
             window.window_id, len(variants), len(scenarios), target.n_disks, spec.name)
    simulate(spark, cfg, grid, requests=windowed,
             files=TableFiles(tables["requests"], (window.start_us, window.end_us)))
    results = {r["scenario_id"]: r for r in trace_rows(spark, cfg.warehouse, "sim_results", job.trace_id)
               if r["grid_id"] == grid_id}
    rows = score_rows(variants, scenario_of, results, target=target, window=window, window_requests=stats.requests,
                      grid_id=grid_id, array_group=ARRAY_GROUP)
    df = spark.createDataFrame([tuple(r[c] for c in PS.COLUMNS) for r in rows], PS.SPARK_SCHEMA)
    replace_rows(df, spark, cfg.warehouse, PS.TABLE, {"trace_id": job.trace_id, "window_id": window.window_id})
    pending = {k: v for k, v in PENDING_FAMILIES.items() if job.families is None or k in job.families}
    return ScoreSummary(grid_id, window, rows, pending, {k: v for k, v in tables.items() if v is not None}, skipped)


def config_from_args(trace_id: str, args: argparse.Namespace) -> ScoreConfig:
    """Parsed options -> ScoreConfig (bad values: PolicyError / ValueError naming the option)."""
    def numbers(text: str, option: str, kind: type) -> tuple[Any, ...]:
        try:
            return tuple(kind(x) for x in text.split(",") if x.strip())
        except ValueError as exc:
            raise PolicyError(f"{option} {text!r}: expected comma-separated numbers") from exc

    sweep = SweepOptions(extent_bytes=tuple(k * 1024 for k in numbers(args.extent_kib, "--extent-kib", int)),
                         heat_fractions=numbers(args.heat_fractions, "--heat-fractions", float),
                         cooling_every_s=args.cooling_every_s,
                         cooling_every_requests=args.cooling_every, cooling_delta=args.cooling_delta,
                         alis_interval_s=args.alis_interval,
                         alis_ra_offsets=numbers(args.alis_area_offsets, "--alis-area-offsets", float))
    chosen = tuple(x.strip() for x in args.families.split(",") if x.strip()) if args.families else None
    # Checked here, before any session: the window's form (its end against the trace's span comes later), the
    # families' and the spec's names (a shipped name or a spec file).
    check_window(args.window)
    families(chosen)
    if args.spec is not None:
        try:
            resolve_spec(args.spec)
        except (KeyError, OSError, ValueError) as exc:
            raise PolicyError(f"--spec {args.spec!r}: {exc}") from exc
    return ScoreConfig(trace_id, args.window, args.spec, args.scheduler, args.speedup, args.seed, chosen, sweep)


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of this job (after its --trace-id) and of `blockheat score TRACE_ID`."""
    parser.add_argument("--window", default="all", help="all (default) or START:END seconds from the trace start")
    parser.add_argument("--spec", default=None, help="disk spec name or file (default: the trace's recorded geometry)")
    parser.add_argument("--scheduler", default="clook", choices=("fcfs", "sstf", "clook"),
                        help="each simulated disk's queue order (default clook, like the traced driver's C-SCAN)")
    parser.add_argument("--speedup", type=float, default=1.0, help="open-loop speed-up alpha (default 1)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the random placements (default 1)")
    parser.add_argument("--families", default=None, help="comma-separated policy families (default: all)")
    parser.add_argument("--extent-kib", default="1024", help="extent sizes for greedy and cooling, KiB (default 1024)")
    parser.add_argument("--heat-fractions", default="1,0.5", help="greedy's heat fractions (default 1,0.5)")
    parser.add_argument("--cooling-every-s", type=float, default=COOLING_EVERY_S, metavar="S",
                        help="cooling: the demon every S seconds of trace time (default 100, FIVE's trace experiment)")
    parser.add_argument("--cooling-every", type=int, default=None, metavar="N",
                        help="cooling: the demon every N arrivals instead")
    parser.add_argument("--cooling-delta", type=float, default=0.05, help="cooling: trigger delta (default 0.05)")
    parser.add_argument("--alis-interval", type=float, default=None, metavar="S",
                        help="ALIS reorganization interval, s (default: a quarter of the window, at most a day)")
    parser.add_argument("--alis-area-offsets", default="0.3", metavar="X[,X...]",
                        help="where ALIS's reorganized area starts, as a share of each volume (default 0.3, the "
                             "paper's; 1 puts it after the volume, so installing it moves no home data)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit entry point: --trace-id ID [--window START:END] [...]."""
    parser = argparse.ArgumentParser(prog="policy_scores", description=__doc__)
    parser.add_argument("--trace-id", required=True)
    args = add_arguments(parser).parse_args(argv)
    cfg = SparkConfig.from_env(f"policy_scores {args.trace_id}")
    run(build_session(cfg), cfg, config_from_args(args.trace_id, args))
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    raise SystemExit(main())
