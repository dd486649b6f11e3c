"""Spark application: heat and temperature per extent (`extent_heat`) and per disk (`disk_heat`)."""
from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from blockheat.libs.io.delta_files import replace_from_driver
from blockheat.libs.io.session import SparkConfig, build_session
from blockheat.libs.io.tables import read_table, replace_rows, table_target, trace_info
from blockheat.libs.table_io.changes import requests_state
from blockheat.libs.table_io.device_pass import files_or_sql
from blockheat.libs.table_io.heat import HeatParams, extent_and_disk_heat
from blockheat.libs.table_io.heat_update import HeatState, counts_table, forget_state, update_heat, whole_table
from blockheat.libs.transforms.heat import (
    LAYOUTS,
    compute_extent_heat,
    disk_heat_table,
    whole_trace_disk_table,
    whole_trace_extent_heat,
)
from blockheat.schemas import disk_heat, extent_heat

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HeatConfig:
    """What `blockheat heat` computes. stripe_width / random_disks of 0 mean "as many disks as the
    trace has devices, at least 2" (the array the traced devices would be spread over)."""

    trace_id: str
    extent_bytes: int = 1 << 20
    window_us: int = 3_600_000_000
    stripe_unit_bytes: int = 65_536
    stripe_width: int = 0
    random_disks: int = 0
    seed: int = 0


def run(spark: SparkSession, cfg: SparkConfig, job: HeatConfig, *, full: bool = False) -> dict[str, int]:
    """Writes extent_heat for the window and the whole trace, and disk_heat for the three layouts: after an append
    only the windows the new requests reach into are computed again (libs.table_io.heat_update); with `full` (or
    without a usable state) the whole trace. Returns row counts per table and window."""
    info = trace_info(spark, cfg.warehouse, job.trace_id)
    span_us = int(info["span_us"])
    disks = max(2, len(info["devices"]))
    if not full:
        params = _params(job, span_us, disks)
        updated = files_or_sql(lambda: update_heat(spark, cfg.warehouse, job.trace_id, params, info["devices"]),
                               lambda: None, f"extent heat update {job.trace_id}")
        if updated is not None:
            return updated
    return files_or_sql(lambda: _run_files(spark, cfg, job, span_us, disks),
                        lambda: _run_sql(spark, cfg, job, span_us, disks), f"extent heat {job.trace_id}")


def _params(job: HeatConfig, span_us: int, disks: int) -> HeatParams:
    return HeatParams(span_us, job.extent_bytes, job.window_us, job.stripe_unit_bytes, job.stripe_width or disks,
                      job.random_disks or disks, job.seed)


def _run_sql(spark: SparkSession, cfg: SparkConfig, job: HeatConfig, span_us: int, disks: int) -> dict[str, int]:
    """run's tables through the Spark SQL definitions (libs.transforms.heat); the update state is dropped."""
    forget_state(cfg.warehouse, job.trace_id, _params(job, span_us, disks))
    requests = read_table(spark, cfg.warehouse, "requests", job.trace_id)
    written = {}
    for window_us in dict.fromkeys((job.window_us, 0)):
        # The whole trace's counts are the windows' counts summed: after the windows, from their stored rows.
        derived = window_us == 0 and job.window_us != 0
        log.info("extent heat: %s, extent %d B, window %s%s", job.trace_id, job.extent_bytes,
                 f"{window_us / 1e6:g} s" if window_us else "whole trace", " (from the windows)" if derived else "")
        if derived:
            windows = read_table(spark, cfg.warehouse, extent_heat.TABLE, job.trace_id).where(
                f"extent_bytes = {job.extent_bytes} AND window_us = {job.window_us}")
            heat = whole_trace_extent_heat(windows, extent_bytes=job.extent_bytes, span_us=span_us)
        else:
            heat = compute_extent_heat(requests, extent_bytes=job.extent_bytes, window_us=window_us,
                                       span_us=span_us)
        replace_rows(heat, spark, cfg.warehouse, extent_heat.TABLE,
                     {"trace_id": job.trace_id, "extent_bytes": job.extent_bytes, "window_us": window_us})
        # The counts per window and disk are small: the driver adds the statistics and writes the rows.
        log.info("disk heat: %s layouts", ", ".join(LAYOUTS))
        if derived:
            dh = whole_trace_disk_table(read_table(spark, cfg.warehouse, disk_heat.TABLE, job.trace_id).where(
                F.col("window_us") == job.window_us).toArrow(), span_us=span_us)
        else:
            dh = disk_heat_table(requests, layouts=LAYOUTS, window_us=window_us, span_us=span_us,
                                 stripe_unit_bytes=job.stripe_unit_bytes, width=job.stripe_width or disks,
                                 disks=job.random_disks or disks, seed=job.seed)
        replace_from_driver(spark, table_target(spark, cfg.warehouse, disk_heat.TABLE),
                            {"trace_id": job.trace_id, "window_us": window_us}, dh)
    counts = (read_table(spark, cfg.warehouse, extent_heat.TABLE, job.trace_id)
              .where(F.col("extent_bytes") == job.extent_bytes).groupBy("window_us").count().collect())
    for window_us in dict.fromkeys((job.window_us, 0)):
        written[f"extent_heat window_us={window_us}"] = next((r["count"] for r in counts
                                                              if r["window_us"] == window_us), 0)
    return written


def _run_files(spark: SparkSession, cfg: SparkConfig, job: HeatConfig, span_us: int, disks: int) -> dict[str, int]:
    """run's tables from one pass over the requests files (libs.table_io.heat); Unsupported, before
    anything is written, when they cannot be read directly."""
    params = _params(job, span_us, disks)
    version, sha256 = requests_state(cfg.warehouse, job.trace_id)        # before the pass: what it reads
    log.info("extent heat: %s, extent %d B, windows %s, one task per device", job.trace_id, job.extent_bytes,
             ", ".join(f"{w / 1e6:g} s" if w else "whole trace" for w in params.windows))
    written, dh, counts = extent_and_disk_heat(spark, cfg.warehouse, job.trace_id, params)
    target = table_target(spark, cfg.warehouse, disk_heat.TABLE)
    replace_from_driver(spark, target, {"trace_id": job.trace_id, "window_us": job.window_us}, dh)
    if job.window_us:
        replace_from_driver(spark, target, {"trace_id": job.trace_id, "window_us": 0},
                            whole_trace_disk_table(dh, span_us=span_us))
    devices = sorted(counts)
    HeatState(version, sha256, devices, {d: int(counts[d]["end"]) for d in devices}, counts_table(counts),
              whole_table(counts), written.get(params.window_us, 0) if params.window_us else 0
              ).save(cfg.warehouse, job.trace_id, params)
    return {f"extent_heat window_us={w}": n for w, n in written.items()}


def parse_args(argv: Sequence[str] | None) -> tuple[HeatConfig, bool]:
    parser = argparse.ArgumentParser(prog="extent_heat", description=__doc__)
    parser.add_argument("trace_id")
    parser.add_argument("--extent-bytes", type=int, default=1 << 20)
    parser.add_argument("--window", type=float, default=3600.0, help="seconds (0 = whole trace only)")
    parser.add_argument("--full", action="store_true", help="compute the whole trace (not only what changed)")
    args = parser.parse_args(argv)
    return HeatConfig(args.trace_id, args.extent_bytes, round(args.window * 1e6)), args.full


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit entry point."""
    job, full = parse_args(argv)
    logging.basicConfig(level=logging.INFO)        # whether the run updated or computed whole
    cfg = SparkConfig.from_env("extent_heat")
    run(build_session(cfg), cfg, job, full=full)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
