"""`blockheat advise TRACE_ID`: striping-unit advice from a trace's profile (FIVE's two phases, equation 1,
the MPL-slope rule, optionally the simulator's Gbest) into `striping_recommendations`, with a summary."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from jobs.cli.common import checked, print_table, spark_session

SUMMARY = ("scope", "file", "method", "parallelism", "striping_unit_bytes", "width", "predicted_response_ms",
           "simulated_response_ms", "distance_from_gbest")


def add_commands(sub: Any) -> None:
    adv = sub.add_parser(
        "advise", help="striping unit and width per method for a profiled trace (striping_recommendations)",
        description="Needs the trace's profile (blockheat profile TRACE_ID). Methods: five (FIVE's P_eff), "
                    "five_phase_a (light load), eq1 (Lee and Katz), mpl_slope (Chen and Patterson), gbest "
                    "(--gbest: the simulator's best over a sweep of stripe units).")
    adv.defer(_advice_arguments).set_defaults(func=cmd_advise)


def _advice_arguments(parser: argparse.ArgumentParser) -> None:
    from jobs.striping_advice import add_arguments  # lazy: the job (pyspark) loads only for `advise`

    add_arguments(parser)
    parser.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    parser.add_argument("--files", action="store_true", help="also print the per-file rows")


def cmd_advise(args: argparse.Namespace) -> int:
    from jobs.striping_advice import config_from_args, run  # lazy: the job (pyspark) loads only for `advise`

    job = checked(config_from_args, args)
    spark, cfg = spark_session(args, f"advise {args.trace_id}")
    rows = run(spark, cfg, job)
    shown = [r for r in rows if args.files or r["scope"] == "global"]
    if args.json:
        for r in shown:
            sys.stdout.write(json.dumps(r) + "\n")
        return 0
    head = rows[0]
    rate = "light load" if head["rate_per_s"] is None else f"{head['rate_per_s']:.4g} requests/s"
    sys.stdout.write(f"\nstriping advice {head['advice_id']} for {head['trace_id']}: {head['n_disks']} disks of "
                     f"{head['spec']}, {rate}, MPL {head['mpl']:.3g}\n")
    print_table(shown, SUMMARY)
    sys.stdout.write("\ntable: striping_recommendations\n")
    return 0
