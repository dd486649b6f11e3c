"""Spark application: striping-unit advice for one trace (`striping_recommendations`): FIVE's two phases,
equation 1 (Lee and Katz) and the MPL-slope rule from the trace's profile (mean request size, arrival rate,
per-device sizes), globally and per device or address region; optionally the simulator's Gbest sweep
over the trace's own requests. The formulas live in libs/plans/striping_advisor.py; this is the thin edge."""
from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from blockheat.libs.io.session import SparkConfig, build_session
from blockheat.libs.io.tables import read_table, replace_rows, trace_info
from blockheat.libs.plans.striping_advisor import (
    DiskModel,
    FileStats,
    Workload,
    advise,
    estimate_mpl,
    recommendation_rows,
    simulated_response,
)
from blockheat.schemas import striping_recommendations as SR
from blockheat.schemas import trace_profile
from blockheat.schemas.requests import REPLAY_COLUMNS
from blockheat.sim import SimConfig
from blockheat.sim import requests_from_arrow as from_arrow
from blockheat.sim import resolve_spec as resolve

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from blockheat.sim import DiskSpec

log = logging.getLogger(__name__)

#: Above this many requests the Gbest sweep (the trace on the driver, one simulation per unit) logs a warning.
GBEST_WARN_REQUESTS = 5_000_000


@dataclass(frozen=True)
class AdviceConfig:
    """One advice run. n_disks None: one disk per traced device. rate_per_s replaces the trace's rate
    (speedup then not applied); light_load drops Phase B (no rate). region_bytes: files are address
    regions of that size instead of devices. gbest: also sweep stripe units in the simulator."""

    trace_id: str
    spec: str = "five_table1"
    n_disks: int | None = None
    speedup: float = 1.0
    rate_per_s: float | None = None
    light_load: bool = False
    mpl: float | None = None
    aligned: bool | None = None
    region_bytes: int | None = None
    gbest: bool = False
    sweep_units: tuple[int, ...] | None = None
    advice_id: str | None = None
    seed: int = 1

    def __post_init__(self) -> None:
        if not (self.speedup > 0 and math.isfinite(self.speedup)):
            raise ValueError(f"speedup must be a positive number, got {self.speedup}")
        if self.n_disks is not None and self.n_disks <= 0:
            raise ValueError(f"n_disks must be > 0, got {self.n_disks}")
        if self.region_bytes is not None and self.region_bytes <= 0:
            raise ValueError(f"region_bytes must be > 0, got {self.region_bytes}")
        if self.rate_per_s is not None and not self.rate_per_s > 0:
            raise ValueError(f"rate_per_s must be > 0, got {self.rate_per_s}")


def _metrics(profile: Iterable[Mapping[str, Any]], scope: str) -> dict[str, dict[str, float]]:
    """device -> metric -> value of the whole-trace window (window_us = 0)."""
    out: dict[str, dict[str, float]] = {}
    for r in profile:
        if r["scope"] == scope and r["window_us"] == 0 and r["value"] is not None:
            out.setdefault(str(r["device"]), {})[str(r["metric"])] = float(r["value"])
    return out


def advice_inputs(profile: Iterable[Mapping[str, Any]], device_bytes: Mapping[str, int], *, block_bytes: int,
                  cfg: AdviceConfig, regions: Iterable[Mapping[str, Any]] = ()) -> tuple[Workload, list[FileStats]]:
    """The advisor's inputs from `trace_profile` rows: R-bar (trace size_bytes_mean), lambda-bar (trace
    rate_per_s x speedup), files (devices: their size_bytes_mean and highest address; or regions: rows
    device, start_bytes, mean_size_bytes), L-bar the files' mean size. Sizes in blocks, at least one."""
    rows = list(profile)
    trace = _metrics(rows, "trace").get("*", {})
    if "size_bytes_mean" not in trace or "rate_per_s" not in trace:
        raise ValueError("trace_profile has no whole-trace size_bytes_mean / rate_per_s (run the profile job)")
    r_mean = max(1.0, trace["size_bytes_mean"] / block_bytes)
    files: list[FileStats] = []
    if cfg.region_bytes is None:
        devices = _metrics(rows, "device")
        for dev in sorted(devices):
            size = device_bytes.get(dev)
            if size is None or "size_bytes_mean" not in devices[dev]:
                continue
            r_i = max(1.0, devices[dev]["size_bytes_mean"] / block_bytes)
            files.append(FileStats(dev, r_i, max(1.0, size / block_bytes)))
    else:
        for reg in sorted(regions, key=lambda x: (str(x["device"]), int(x["start_bytes"]))):
            dev, start = str(reg["device"]), int(reg["start_bytes"])
            size = min(cfg.region_bytes, device_bytes[dev] - start)
            r_i = max(1.0, float(reg["mean_size_bytes"]) / block_bytes)
            files.append(FileStats(f"{dev}:{start}", r_i, max(1.0, size / block_bytes)))
    l_mean = sum(f.file_blocks for f in files) / len(files) if files else r_mean
    if cfg.light_load:
        rate = None
    elif cfg.rate_per_s is not None:
        rate = cfg.rate_per_s
    else:
        rate = trace["rate_per_s"] * cfg.speedup
    return Workload(r_mean, l_mean, rate, cfg.mpl, cfg.aligned), files


def run(spark: SparkSession, cfg: SparkConfig, job: AdviceConfig) -> list[dict[str, Any]]:
    """Replaces the (trace, advice_id) rows of striping_recommendations; returns them."""
    spec = resolve(job.spec)
    info = trace_info(spark, cfg.warehouse, job.trace_id)
    devices = sorted(info["devices"])
    n_disks = job.n_disks or len(devices)
    advice_id = job.advice_id or f"{job.spec}x{n_disks}"
    profile = [r.asDict() for r in read_table(spark, cfg.warehouse, trace_profile.TABLE, job.trace_id)
               .where(F.col("window_us") == 0).collect()]
    requests = read_table(spark, cfg.warehouse, "requests", job.trace_id)
    ends = requests.groupBy("device").agg(F.max(F.col("offset_bytes") + F.col("size_bytes")).alias("end")).collect()
    device_bytes = {str(r["device"]): int(r["end"]) for r in ends}
    regions: list[dict[str, Any]] = []
    if job.region_bytes is not None:
        start = (F.col("offset_bytes") / F.lit(job.region_bytes)).cast("long") * F.lit(job.region_bytes)
        regions = [r.asDict() for r in requests.groupBy("device", start.alias("start_bytes"))
                   .agg(F.avg("size_bytes").alias("mean_size_bytes")).collect()]
    workload, files = advice_inputs(profile, device_bytes, block_bytes=spec.sector_size, cfg=job, regions=regions)
    model = DiskModel.from_spec(spec)
    simulate = _gbest_simulator(requests, spec, devices, device_bytes, n_disks, job) if job.gbest else None
    log.info("striping advice %s for %s: R-bar %.1f blocks, lambda-bar %s/s, %d files, %d disks of %s",
             advice_id, job.trace_id, workload.mean_request_blocks, workload.rate_per_s, len(files), n_disks, spec.name)
    recs = advise(model, n_disks=n_disks, workload=workload, files=files,
                  file_scope="device" if job.region_bytes is None else "region", simulate=simulate,
                  sweep_units=job.sweep_units)
    mpl = workload.mpl if workload.mpl is not None else estimate_mpl(model, workload)
    keys = {"trace_id": job.trace_id, "advice_id": advice_id, "spec": spec.name, "n_disks": n_disks,
            "block_bytes": spec.sector_size, "rate_per_s": workload.rate_per_s, "mpl": mpl}
    rows = [{**keys, **r} for r in recommendation_rows(recs, block_bytes=spec.sector_size)]
    df = spark.createDataFrame([tuple(r[c] for c in SR.COLUMNS) for r in rows], SR.SPARK_SCHEMA)
    replace_rows(df, spark, cfg.warehouse, SR.TABLE, {"trace_id": job.trace_id, "advice_id": advice_id})
    return rows


def _gbest_simulator(requests: Any, spec: DiskSpec, devices: Sequence[str], device_bytes: Mapping[str, int],
                     n_disks: int, job: AdviceConfig) -> Any:
    """The trace's requests on the driver as sim Requests, and the sweep's simulate function."""
    table = requests.select(*REPLAY_COLUMNS).toArrow()
    if table.num_rows > GBEST_WARN_REQUESTS:
        log.warning("gbest: simulating %d requests per stripe unit on the driver", table.num_rows)
    reqs, order = from_arrow(table, sector_size=spec.sector_size, devices=devices)
    sectors = [-(-device_bytes.get(d, 0) // spec.sector_size) for d in order]
    return simulated_response(spec, reqs, n_disks=n_disks, config=SimConfig(speedup=job.speedup), seed=job.seed,
                              device_sectors=[max(1, s) for s in sectors])


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of this job and of `blockheat advise`."""
    parser.add_argument("trace_id", metavar="TRACE_ID", help="a profiled trace (blockheat profile TRACE_ID)")
    parser.add_argument("--spec", default="five_table1", help="shipped spec name or spec file (default five_table1)")
    parser.add_argument("--disks", type=int, default=None, help="D (default: one per traced device)")
    parser.add_argument("--speedup", type=float, default=1.0, help="arrival-rate speed-up alpha")
    parser.add_argument("--rate", type=float, default=None, help="arrival rate per second (replaces the trace's)")
    parser.add_argument("--light-load", action="store_true", help="Phase A only (no arrival rate)")
    parser.add_argument("--mpl", type=float, default=None, help="multiprogramming level for eq1 and mpl_slope")
    parser.add_argument("--aligned", choices=("auto", "yes", "no"), default="auto",
                        help="requests start at run boundaries (auto: Figure 2's 1 < R < L test)")
    parser.add_argument("--region-bytes", type=int, default=None, help="files are address regions of this size")
    parser.add_argument("--gbest", action="store_true", help="sweep stripe units in the simulator (on the driver)")
    parser.add_argument("--sweep", default=None, help="comma-separated stripe units in blocks for --gbest")
    parser.add_argument("--advice-id", default=None, help="row key (default SPECxDISKS)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the --gbest simulations (default 1)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit entry point."""
    parser = argparse.ArgumentParser(prog="striping_advice", description=__doc__)
    add_arguments(parser)
    args = parser.parse_args(argv)
    cfg = SparkConfig.from_env("striping_advice")
    run(build_session(cfg), cfg, config_from_args(args))
    return 0


def config_from_args(args: argparse.Namespace) -> AdviceConfig:
    """Parsed add_arguments options -> AdviceConfig (bad values: ValueError naming the value)."""
    sweep = tuple(int(x) for x in args.sweep.split(",") if x) if args.sweep else None
    return AdviceConfig(args.trace_id, args.spec, args.disks, args.speedup, args.rate, args.light_load, args.mpl,
                        {"auto": None, "yes": True, "no": False}[args.aligned], args.region_bytes, args.gbest, sweep,
                        args.advice_id, args.seed)


if __name__ == "__main__":
    raise SystemExit(main())
