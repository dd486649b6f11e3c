"""`blockheat advise TRACE_ID`: striping-unit advice from a trace's profile (FIVE's two phases, equation 1,
the MPL-slope rule, optionally the simulator's Gbest) into `striping_recommendations`, with a summary."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from jobs.cli.main import UsageError, print_table, spark_session

SUMMARY = ("scope", "file", "method", "parallelism", "striping_unit_bytes", "width", "predicted_response_ms",
           "simulated_response_ms", "distance_from_gbest")


def add_commands(sub: Any) -> None:
    adv = sub.add_parser(
        "advise", help="striping unit and width per method for a profiled trace (striping_recommendations)",
        description="Needs the trace's profile (blockheat profile TRACE_ID). Methods: five (FIVE's P_eff), "
                    "five_phase_a (light load), eq1 (Lee and Katz), mpl_slope (Chen and Patterson), gbest "
                    "(--gbest: the simulator's best over a sweep of stripe units).")
    add_advice_arguments(adv)
    adv.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    adv.add_argument("--files", action="store_true", help="also print the per-file rows")
    adv.set_defaults(func=cmd_advise)


def add_advice_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `blockheat advise` and jobs/striping_advice.py."""
    parser.add_argument("trace_id")
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
    parser.add_argument("--seed", type=int, default=1)


def cmd_advise(args: argparse.Namespace) -> int:
    from jobs.striping_advice import config_from_args, run

    try:
        job = config_from_args(args)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
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
