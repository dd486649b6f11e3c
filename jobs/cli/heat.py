"""`blockheat heat | age | track | track-eval | profile | report`: the heat analytics commands.

Each runs a Spark job from jobs/ that writes its Delta tables, then prints a one-screen summary.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from blockheat.jobs.cli.common import (
    UsageError,
    add_command,
    add_output_options,
    output,
    require_writable_directory,
    say,
    spark_session,
)
from blockheat.jobs.cli.output import BYTES, HUMAN_FORMATS, MICROSECONDS, SECONDS, SHARE, human

#: The output's unit of a profile metric's kind (libs.report.profile_kind); other kinds are plain numbers.
_UNITS = {"bytes": BYTES, "share": SHARE, "us": MICROSECONDS, "s": SECONDS}


def _seconds_to_us(value: float, name: str, *, allow_zero: bool = False) -> int:
    if value < 0 or (value == 0 and not allow_zero):
        raise UsageError(f"{name} must be {'>= 0' if allow_zero else '> 0'} seconds, got {value:g}")
    return round(value * 1e6)


def cmd_heat(args: argparse.Namespace) -> int:
    from blockheat.jobs.extent_heat import HeatConfig, run  # lazy: the job (pyspark) loads only for `heat`

    job = HeatConfig(args.trace_id, args.extent_bytes, _seconds_to_us(args.window, "--window", allow_zero=True),
                     args.stripe_unit_bytes, args.stripe_width, args.random_disks, args.seed)
    # its passes run in Python workers reading the files: a local driver's JVM schedules and commits only
    spark, cfg = spark_session(args, f"heat {args.trace_id}", trace_id=args.trace_id, lean_local=True)
    run(spark, cfg, job, full=args.full)
    hottest = spark.sql(
        "SELECT device, extent_id, requests, blocks, heat AS heat_blocks_s, temperature FROM extent_heat "
        f"WHERE trace_id = '{args.trace_id}' AND extent_bytes = {args.extent_bytes} AND window_us = 0 "
        "ORDER BY heat DESC, device, extent_id LIMIT 10").collect()
    out = output(args)
    out.rows([r.asDict() for r in hottest], ["device", "extent_id", "requests", "blocks", "heat_blocks_s",
                                             "temperature"], name="hottest_extents",
             title=f"\nhottest {human(args.extent_bytes, BYTES)} extents over the whole trace "
                   "(heat = 512-byte blocks/s):")
    balance = spark.sql(
        "SELECT layout, layout_params, first(disks) AS disks, count(DISTINCT window_start_us) AS windows, "
        "avg(max_over_mean) AS mean_max_over_mean, max(max_over_mean) AS worst_max_over_mean "
        f"FROM disk_heat WHERE trace_id = '{args.trace_id}' AND window_us = {job.window_us} "
        "GROUP BY layout, layout_params ORDER BY layout").collect()
    out.rows([r.asDict() for r in balance], ["layout", "layout_params", "disks", "windows", "mean_max_over_mean",
                                             "worst_max_over_mean"], name="disk_balance",
             title=f"\ndisk heat balance per {human(args.window, SECONDS)} window (max/mean heat across disks; "
                   "1 = perfect):")
    out.note("\ntables: extent_heat, disk_heat")
    return out.render()


def cmd_age(args: argparse.Namespace) -> int:
    from blockheat.jobs.aged_heat import AgingConfig, run  # lazy: the job (pyspark) loads only for `age`

    if not 0.0 <= args.alpha <= 1.0:
        raise UsageError(f"--alpha must be in [0, 1], got {args.alpha}")
    job = AgingConfig(args.trace_id, args.extent_bytes, _seconds_to_us(args.interval, "--interval"), args.alpha,
                      args.from_scratch)
    spark, cfg = spark_session(args, f"age {args.trace_id}", trace_id=args.trace_id)
    done = run(spark, cfg, job)
    rows = spark.sql(
        "SELECT interval_id, count(*) AS extents, sum(count) AS requests, sum(aged_count) AS aged "
        f"FROM aged_heat WHERE trace_id = '{args.trace_id}' AND extent_bytes = {job.extent_bytes} "
        f"AND interval_us = {job.interval_us} AND alpha = {job.alpha} GROUP BY interval_id ORDER BY interval_id"
    ).collect()
    out = output(args)
    out.note(f"\ncomputed intervals: {done if done else 'none (all up to date; --from-scratch recomputes)'}")
    out.rows([r.asDict() for r in rows], ["interval_id", "extents", "requests", "aged"], name="intervals")
    return out.render()


def cmd_track(args: argparse.Namespace) -> int:
    from blockheat.jobs.heat_tracking import TrackConfig, run_track  # lazy: the job (pyspark) loads only for `track`

    if args.k < 2:
        raise UsageError(f"--k must be >= 2, got {args.k}")
    job = TrackConfig(args.trace_id, args.k, _seconds_to_us(args.aging_period, "--aging-period"), args.extent_bytes)
    spark, cfg = spark_session(args, f"track {args.trace_id}", trace_id=args.trace_id)
    n = run_track(spark, cfg, job, full=args.full)
    summary = spark.sql(
        "SELECT count(DISTINCT device, extent_id) AS extents, count(DISTINCT checkpoint_us) AS checkpoints, "
        "avg(abs(heat - true_heat) / true_heat) AS mean_rel_error_aged, "
        "avg(abs(heat_no_aging - true_heat) / true_heat) AS mean_rel_error_no_aging "
        f"FROM heat_tracking WHERE trace_id = '{args.trace_id}' AND k = {args.k} "
        f"AND extent_bytes = {job.extent_bytes} AND aging_period_us = {job.aging_period_us} "
        "AND heat IS NOT NULL AND true_heat > 0").first().asDict()
    out = output(args)
    out.note(f"\nheat_tracking: {n:,} rows (extent x checkpoint) written for k={args.k}, aging every "
             f"{human(args.aging_period, SECONDS)}")
    out.rows([summary], list(summary), name="tracking")
    return out.render()


def cmd_track_eval(args: argparse.Namespace) -> int:
    # lazy: the job (pyspark) loads only for `track-eval`
    from blockheat.jobs.heat_tracking import run_eval
    from blockheat.libs.transforms.tracking_eval import accuracy, judge_claims

    spark, cfg = spark_session(args, f"track-eval {args.trace_id}", trace_id=args.trace_id)
    rows = run_eval(spark, cfg, args.trace_id, aging_period_us=_seconds_to_us(args.aging_period, "--aging-period"),
                    extent_bytes=args.extent_bytes, full=args.full)
    out = output(args)
    out.rows(rows, ["k", "checkpoints", "mean_relative_error", "median_relative_error", "requests_to_90pct",
                    "stale_s_aging", "stale_s_no_aging"], name="tracking_eval",
             units={"stale_s_aging": SECONDS, "stale_s_no_aging": SECONDS},
             title="\ntracking accuracy (real trace: relative error against the next period's true heat; "
                   "generated traces: 10x rise and sudden stop):")
    accurate, verdict = accuracy(rows)
    out.rows([{"accurate": accurate, "verdict": verdict}], ["accurate", "verdict"], name="accuracy",
             title="\naccuracy on the real trace (the estimate against the next period's true heat):")
    out.rows([c._asdict() for c in judge_claims(rows)], ["claim", "holds", "ours", "reason"], name="claims",
             title="\nFIVE section 3.3 claims against these numbers (insensitivity to k is not accuracy):")
    return out.render()


def cmd_profile(args: argparse.Namespace) -> int:
    from blockheat.jobs.trace_profile import run  # lazy: the job (pyspark) loads only for `profile`

    # the profile's passes run in Python workers reading the files: a local driver's JVM schedules and commits only
    spark, cfg = spark_session(args, f"profile {args.trace_id}", trace_id=args.trace_id, lean_local=True)
    run(spark, cfg, args.trace_id, window_us=_seconds_to_us(args.window, "--window"), full=args.full)
    rows = spark.sql(
        "SELECT scope, device, metric, value FROM trace_profile "
        f"WHERE trace_id = '{args.trace_id}' AND window_us = 0 ORDER BY scope DESC, device, metric").collect()
    if args.output == "json":        # one object: {"trace": {metric: value}, "device D": {...}}
        doc: dict[str, dict[str, float | None]] = {}
        for r in rows:
            doc.setdefault("trace" if r.scope == "trace" else f"device {r.device}", {})[r.metric] = r.value
        output(args).render()                               # erases the progress line
        sys.stdout.write(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        return 0
    # lazy: the report's plotting libraries load only for this table
    from blockheat.libs.report import profile_groups, profile_kind, profile_table

    out = output(args)
    if args.output in HUMAN_FORMATS:        # grouped and labelled as in the report, every metric shown
        out.note(f"profile of {args.trace_id} (whole trace; per-window rows are in trace_profile)")
        for title, lines, columns in profile_groups([r.asDict() for r in rows], every_metric=True):
            out.rows(lines, columns, name=title, title=f"\n{title}:")
        return out.render()
    table, columns = profile_table([r.asDict() for r in rows])
    out.rows(table, columns, name="profile", cell_unit=lambda row, column: None if column == "metric" else
             _UNITS.get(profile_kind(row["metric"])))
    return out.render()


def cmd_report(args: argparse.Namespace) -> int:
    from blockheat.jobs.heat_report import run  # lazy: the job (pyspark) loads only for `report`

    if args.out:
        require_writable_directory("--out", args.out)
    spark, cfg = spark_session(args, f"report {args.trace_id}", trace_id=args.trace_id)
    path = run(spark, cfg, args.trace_id, out_dir=args.out, full=args.full)
    return say(f"\nreport: {path}")


def add_commands(sub: Any) -> None:
    """Registers the heat analytics subcommands on the `blockheat` parser."""
    heat = add_command(sub, "heat", "heat and temperature per extent and disk (extent_heat, disk_heat)",
                       "blockheat heat hplajw --window 600")
    heat.add_argument("trace_id", metavar="TRACE_ID", help="an ingested trace")
    heat.add_argument("--extent-bytes", type=int, default=1 << 20, help="extent size (default 1 MiB)")
    heat.add_argument("--window", type=float, default=3600.0,
                      help="window in seconds (default 3600; the whole-trace window is always written)")
    heat.add_argument("--stripe-unit-bytes", type=int, default=65_536, help="striped layout unit (default 64 KiB)")
    heat.add_argument("--stripe-width", type=int, default=0, help="striped layout disks (default: devices, >= 2)")
    heat.add_argument("--random-disks", type=int, default=0, help="random layout disks (default: devices, >= 2)")
    heat.add_argument("--seed", type=int, default=0, help="seed of the random layout's placement")
    heat.add_argument("--full", action="store_true",
                      help="compute the whole trace again (default: after an append, only the windows it reaches)")
    add_output_options(heat)
    heat.set_defaults(func=cmd_heat)

    age = add_command(sub, "age", "aged reference counts per reorganization interval (ALIS eq. 1; aged_heat)",
                      "blockheat age hplajw --alpha 0.5")
    age.add_argument("trace_id", metavar="TRACE_ID", help="an ingested trace")
    age.add_argument("--interval", type=float, default=86_400.0, help="interval in seconds (default one day)")
    age.add_argument("--alpha", type=float, default=0.8,
                     help="age factor in [0, 1]: the weight of the previous intervals' aged count")
    age.add_argument("--extent-bytes", type=int, default=1 << 20, help="extent size")
    age.add_argument("--from-scratch", action="store_true", help="recompute every interval")
    add_output_options(age)
    age.set_defaults(func=cmd_age)

    track = add_command(sub, "track", "interarrival heat tracking per extent (FIVE 3.3; heat_tracking)",
                        "blockheat track hplajw --k 20")
    track.add_argument("trace_id", metavar="TRACE_ID", help="an ingested trace")
    track.add_argument("--k", type=int, default=10, help="requests in the moving window (default 10)")
    track.add_argument("--aging-period", type=float, default=3600.0, help="seconds between pseudo requests")
    track.add_argument("--extent-bytes", type=int, default=1 << 20, help="extent size")
    track.add_argument("--full", action="store_true",
                       help="track the whole trace again (default: after an append, on from the stored state)")
    add_output_options(track)
    track.set_defaults(func=cmd_track)

    ev = add_command(sub, "track-eval", "tracking accuracy for k in 5, 10, 20, 50 and the paper's claims "
                                        "(tracking_eval)", "blockheat track-eval hplajw")
    ev.add_argument("trace_id", metavar="TRACE_ID", help="an ingested trace")
    ev.add_argument("--aging-period", type=float, default=3600.0, help="seconds (real-trace checkpoints)")
    ev.add_argument("--extent-bytes", type=int, default=1 << 20, help="extent size")
    ev.add_argument("--full", action="store_true", help="track the whole trace again before the evaluation")
    add_output_options(ev)
    ev.set_defaults(func=cmd_track_eval)

    prof = add_command(sub, "profile", "trace profile: rates, sizes, sequentiality, burstiness, skew, ... "
                                       "(trace_profile)", "blockheat profile hplajw --format json",
                       description="Computes the trace profile (trace_profile) and prints its whole-trace metrics "
                                   "per trace and device; --format json prints one object, {scope: {metric: "
                                   "value}}.")
    prof.add_argument("trace_id", metavar="TRACE_ID", help="an ingested trace")
    prof.add_argument("--window", type=float, default=3600.0, help="seconds (per-window rows)")
    prof.add_argument("--full", action="store_true",
                      help="profile the whole trace again (default: after an append, the new requests merged into the "
                           "stored partial aggregates)")
    add_output_options(prof)
    prof.set_defaults(func=cmd_profile)

    rep = add_command(sub, "report", "self-contained HTML report with figures (runs the analyses it lacks first)",
                      "blockheat report hplajw --out /tmp/hplajw-report")
    rep.add_argument("trace_id", metavar="TRACE_ID", help="an ingested trace")
    rep.add_argument("--out", default=None, help="directory (default <warehouse>/reports/<trace>)")
    rep.add_argument("--full", action="store_true",
                     help="count the distributions over every request again (default: after an append, the new "
                          "requests added to the stored counts)")
    rep.set_defaults(func=cmd_report)
