"""`blockheat heat | age | track | track-eval | profile | report`: the heat analytics commands.

Each runs a Spark job from jobs/ that writes its Delta tables, then prints a one-screen summary.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from jobs.cli.common import UsageError, print_table, spark_session


def _seconds_to_us(value: float, name: str, *, allow_zero: bool = False) -> int:
    if value < 0 or (value == 0 and not allow_zero):
        raise UsageError(f"{name} must be {'>= 0' if allow_zero else '> 0'} seconds, got {value:g}")
    return round(value * 1e6)


def cmd_heat(args: argparse.Namespace) -> int:
    from jobs.extent_heat import HeatConfig, run  # lazy: the job (pyspark) loads only for `heat`

    job = HeatConfig(args.trace_id, args.extent_bytes, _seconds_to_us(args.window, "--window", allow_zero=True),
                     args.stripe_unit_bytes, args.stripe_width, args.random_disks, args.seed)
    spark, cfg = spark_session(args, f"heat {args.trace_id}")
    run(spark, cfg, job)
    out = sys.stdout
    hottest = spark.sql(
        "SELECT device, extent_id, requests, blocks, round(heat, 4) AS heat_blocks_s, "
        "temperature FROM extent_heat "
        f"WHERE trace_id = '{args.trace_id}' AND extent_bytes = {args.extent_bytes} AND window_us = 0 "
        "ORDER BY heat DESC, device, extent_id LIMIT 10").collect()
    out.write(f"\nhottest {args.extent_bytes:,}-byte extents over the whole trace (heat = 512-byte blocks/s):\n")
    print_table([r.asDict() for r in hottest], ["device", "extent_id", "requests", "blocks", "heat_blocks_s",
                                               "temperature"])
    balance = spark.sql(
        "SELECT layout, layout_params, first(disks) AS disks, count(DISTINCT window_start_us) AS windows, "
        "round(avg(max_over_mean), 3) AS mean_max_over_mean, round(max(max_over_mean), 3) AS worst_max_over_mean "
        f"FROM disk_heat WHERE trace_id = '{args.trace_id}' AND window_us = {job.window_us} "
        "GROUP BY layout, layout_params ORDER BY layout").collect()
    out.write(f"\ndisk heat balance per {args.window:g} s window (max/mean heat across disks; 1 = perfect):\n")
    print_table([r.asDict() for r in balance], ["layout", "layout_params", "disks", "windows",
                                               "mean_max_over_mean", "worst_max_over_mean"])
    out.write("\ntables: extent_heat, disk_heat\n")
    return 0


def cmd_age(args: argparse.Namespace) -> int:
    from jobs.aged_heat import AgingConfig, run  # lazy: the job (pyspark) loads only for `age`

    if not 0.0 <= args.alpha <= 1.0:
        raise UsageError(f"--alpha must be in [0, 1], got {args.alpha}")
    job = AgingConfig(args.trace_id, args.extent_bytes, _seconds_to_us(args.interval, "--interval"), args.alpha,
                      args.from_scratch)
    spark, cfg = spark_session(args, f"age {args.trace_id}")
    done = run(spark, cfg, job)
    rows = spark.sql(
        "SELECT interval_id, count(*) AS extents, sum(count) AS requests, round(sum(aged_count), 3) AS aged "
        f"FROM aged_heat WHERE trace_id = '{args.trace_id}' AND extent_bytes = {job.extent_bytes} "
        f"AND interval_us = {job.interval_us} AND alpha = {job.alpha} GROUP BY interval_id ORDER BY interval_id"
    ).collect()
    sys.stdout.write(f"\ncomputed intervals: {done if done else 'none (all up to date; --from-scratch recomputes)'}\n")
    print_table([r.asDict() for r in rows], ["interval_id", "extents", "requests", "aged"])
    return 0


def cmd_track(args: argparse.Namespace) -> int:
    from jobs.heat_tracking import TrackConfig, run_track  # lazy: the job (pyspark) loads only for `track`

    if args.k < 2:
        raise UsageError(f"--k must be >= 2, got {args.k}")
    job = TrackConfig(args.trace_id, args.k, _seconds_to_us(args.aging_period, "--aging-period"), args.extent_bytes)
    spark, cfg = spark_session(args, f"track {args.trace_id}")
    n = run_track(spark, cfg, job)
    summary = spark.sql(
        "SELECT count(DISTINCT device, extent_id) AS extents, count(DISTINCT checkpoint_us) AS checkpoints, "
        "round(avg(abs(heat - true_heat) / true_heat), 3) AS mean_rel_error_aged, "
        "round(avg(abs(heat_no_aging - true_heat) / true_heat), 3) AS mean_rel_error_no_aging "
        f"FROM heat_tracking WHERE trace_id = '{args.trace_id}' AND k = {args.k} "
        f"AND extent_bytes = {job.extent_bytes} AND aging_period_us = {job.aging_period_us} "
        "AND heat IS NOT NULL AND true_heat > 0").first().asDict()
    sys.stdout.write(f"\nheat_tracking: {n:,} rows (extent x checkpoint) for k={args.k}, "
                     f"aging every {args.aging_period:g} s\n")
    print_table([summary], list(summary))
    return 0


def cmd_track_eval(args: argparse.Namespace) -> int:
    # lazy: the job (pyspark) loads only for `track-eval`
    from jobs.heat_tracking import run_eval
    from libs.transforms.tracking_eval import paper_claims

    spark, cfg = spark_session(args, f"track-eval {args.trace_id}")
    rows = run_eval(spark, cfg, args.trace_id, aging_period_us=_seconds_to_us(args.aging_period, "--aging-period"),
                    extent_bytes=args.extent_bytes)
    _print_eval(rows, paper_claims(rows))
    return 0


def _print_eval(rows: list[dict[str, Any]], claims: list[tuple[str, bool | None, str]]) -> None:
    out = sys.stdout
    out.write("\ntracking accuracy (real trace: relative error against the next period's true heat; "
              "generated traces: 10x rise and sudden stop):\n")
    print_table(rows, ["k", "checkpoints", "mean_relative_error", "median_relative_error", "requests_to_90pct",
                       "stale_s_aging", "stale_s_no_aging"])
    out.write("\nFIVE section 3.3 claims against these numbers:\n")
    for claim, holds, evidence in claims:
        verdict = "holds" if holds else "does NOT hold"
        out.write(f"- {claim}: {verdict} ({evidence})\n")


def cmd_profile(args: argparse.Namespace) -> int:
    from jobs.trace_profile import run  # lazy: the job (pyspark) loads only for `profile`

    spark, cfg = spark_session(args, f"profile {args.trace_id}")
    run(spark, cfg, args.trace_id, window_us=_seconds_to_us(args.window, "--window"))
    rows = spark.sql(
        "SELECT scope, device, metric, value FROM trace_profile "
        f"WHERE trace_id = '{args.trace_id}' AND window_us = 0 ORDER BY scope DESC, device, metric").collect()
    if args.json:
        out: dict[str, dict[str, float | None]] = {}
        for r in rows:
            out.setdefault("trace" if r.scope == "trace" else f"device {r.device}", {})[r.metric] = r.value
        sys.stdout.write(json.dumps(out, indent=1, sort_keys=True) + "\n")
        return 0
    from libs.report import profile_table  # lazy: the report's plotting libraries load only for this table

    sys.stdout.write(f"\nprofile of {args.trace_id} (whole trace; per-window rows are in trace_profile):\n")
    print_table(*profile_table([r.asDict() for r in rows]))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from jobs.heat_report import run  # lazy: the job (pyspark) loads only for `report`

    spark, cfg = spark_session(args, f"report {args.trace_id}")
    path = run(spark, cfg, args.trace_id, out_dir=args.out)
    sys.stdout.write(f"\nreport: {path}\n")
    return 0


def add_commands(sub: Any) -> None:
    """Registers the heat analytics subcommands on the `blockheat` parser."""
    heat = sub.add_parser("heat", help="heat and temperature per extent and disk")
    heat.add_argument("trace_id")
    heat.add_argument("--extent-bytes", type=int, default=1 << 20, help="extent size (default 1 MiB)")
    heat.add_argument("--window", type=float, default=3600.0,
                      help="window in seconds (default 3600; the whole-trace window is always written)")
    heat.add_argument("--stripe-unit-bytes", type=int, default=65_536, help="striped layout unit (default 64 KiB)")
    heat.add_argument("--stripe-width", type=int, default=0, help="striped layout disks (default: devices, >= 2)")
    heat.add_argument("--random-disks", type=int, default=0, help="random layout disks (default: devices, >= 2)")
    heat.add_argument("--seed", type=int, default=0, help="random layout seed")
    heat.set_defaults(func=cmd_heat)

    age = sub.add_parser("age", help="aged reference counts per reorganization interval (ALIS eq. 1)")
    age.add_argument("trace_id")
    age.add_argument("--interval", type=float, default=86_400.0, help="seconds (default one day)")
    age.add_argument("--alpha", type=float, default=0.8)
    age.add_argument("--extent-bytes", type=int, default=1 << 20)
    age.add_argument("--from-scratch", action="store_true", help="recompute every interval")
    age.set_defaults(func=cmd_age)

    track = sub.add_parser("track", help="interarrival heat tracking per extent (FIVE 3.3)")
    track.add_argument("trace_id")
    track.add_argument("--k", type=int, default=10, help="requests in the moving window (default 10)")
    track.add_argument("--aging-period", type=float, default=3600.0, help="seconds between pseudo requests")
    track.add_argument("--extent-bytes", type=int, default=1 << 20)
    track.set_defaults(func=cmd_track)

    ev = sub.add_parser("track-eval", help="tracking accuracy for k in 5, 10, 20, 50 and the paper's claims")
    ev.add_argument("trace_id")
    ev.add_argument("--aging-period", type=float, default=3600.0, help="seconds (real-trace checkpoints)")
    ev.add_argument("--extent-bytes", type=int, default=1 << 20)
    ev.set_defaults(func=cmd_track_eval)

    prof = sub.add_parser("profile", help="trace profile: rates, sizes, sequentiality, burstiness, skew, ...")
    prof.add_argument("trace_id")
    prof.add_argument("--window", type=float, default=3600.0, help="seconds (per-window rows)")
    prof.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    prof.set_defaults(func=cmd_profile)

    rep = sub.add_parser("report", help="self-contained HTML report with figures")
    rep.add_argument("trace_id")
    rep.add_argument("--out", default=None, help="directory (default <warehouse>/reports/<trace>)")
    rep.set_defaults(func=cmd_report)
