"""`blockheat advise TRACE_ID`: striping-unit advice from a trace's profile (FIVE's two phases, equation 1,
the MPL-slope rule, optionally the simulator's Gbest) into `striping_recommendations`, with a summary."""
from __future__ import annotations

import argparse
from typing import Any

from blockheat.jobs.cli.common import add_command, add_output_options, checked, output, spark_session

SUMMARY = ("scope", "file", "method", "parallelism", "striping_unit_bytes", "width", "predicted_response_ms",
           "simulated_response_ms", "distance_from_gbest")


def add_commands(sub: Any) -> None:
    adv = add_command(
        sub, "advise", "striping unit and width per method for a profiled trace (striping_recommendations)",
        "blockheat advise hplajw --gbest",
        description="Needs the trace's profile (blockheat profile TRACE_ID). Methods: five (FIVE's P_eff), "
                    "five_phase_a (light load), eq1 (Lee and Katz), mpl_slope (Chen and Patterson), gbest "
                    "(--gbest: the simulator's best over a sweep of stripe units).")
    adv.defer(_advice_arguments).set_defaults(func=cmd_advise)


def _advice_arguments(parser: argparse.ArgumentParser) -> None:
    from blockheat.jobs.striping_advice import add_arguments  # lazy: the job (pyspark) loads only for `advise`

    add_arguments(parser)
    parser.add_argument("--files", action="store_true", help="also print the per-file rows")
    add_output_options(parser)


def cmd_advise(args: argparse.Namespace) -> int:
    from blockheat.jobs.striping_advice import config_from_args, run  # lazy: the job (pyspark) loads only for `advise`

    job = checked(config_from_args, args)
    spark, cfg = spark_session(args, f"advise {args.trace_id}", trace_id=args.trace_id)
    rows = run(spark, cfg, job)
    shown = [r for r in rows if args.files or r["scope"] == "global"]
    head = rows[0]
    rate = "light load" if head["rate_per_s"] is None else f"{head['rate_per_s']:.4g} requests/s"
    out = output(args)
    out.note(f"\nstriping advice {head['advice_id']} for {head['trace_id']}: {head['n_disks']} disks of "
             f"{head['spec']}, {rate}, MPL {head['mpl']:.3g}")
    out.rows(shown, SUMMARY, name="recommendations")
    out.note("\ntable: striping_recommendations")
    return out.render()
