"""The `blockheat` commands the object-store and Spark Connect tests run, in one process (one session for all of
them): `python -m tests.command_run --srt SLICE --vscsi FILE`. The warehouse comes from BLOCKHEAT_WAREHOUSE (a local
path or s3a:// with the AWS_* variables), Spark from BLOCKHEAT_SPARK_MASTER or BLOCKHEAT_SPARK_REMOTE, as for any
command. Prints the plan id on its last line.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

SRT_TRACE = "hplajw-e2e"
VSCSI_TRACE = "vscsi-e2e"
WINDOW = "0:86400"                  # the first day of the slice
NOW = "2026-01-02T03:04:05Z"


def commands(srt: str, vscsi: str) -> list[list[str]]:
    """ingest (HP SRT, vSCSI) -> heat -> ALIS graph and layout -> scorecard -> plan, in that order (the analyses of
    the SRT trace)."""
    return [["ingest", "--format", "hp-srt", "--trace-id", SRT_TRACE, srt],
            ["ingest", "--format", "vscsi", "--trace-id", VSCSI_TRACE, vscsi],
            ["heat", SRT_TRACE],
            ["graph", SRT_TRACE], ["alis", SRT_TRACE],
            ["score", SRT_TRACE, "--window", WINDOW],
            # budgets open: greedy's re-layout (steps in every plan table) rather than its not_worth_it verdict
            ["plan", SRT_TRACE, "--policy", "greedy", "--window", WINDOW, "--now", NOW, "--max-volume-share", "1",
             "--max-idle-share", "1", "--min-gain-per-gib", "0"]]


def main(argv: Sequence[str] | None = None) -> int:
    from blockheat.jobs.cli.main import main as blockheat
    from blockheat.libs.io.tables import rows_from_log

    parser = argparse.ArgumentParser(prog="tests.command_run")
    parser.add_argument("--srt", required=True)
    parser.add_argument("--vscsi", required=True)
    args = parser.parse_args(argv)
    for command in commands(args.srt, args.vscsi):
        print("blockheat", *command, flush=True)
        if (code := blockheat(command)) != 0:
            return code
    (plan,) = rows_from_log(os.environ["BLOCKHEAT_WAREHOUSE"], "reorg_plans", SRT_TRACE)
    if (code := blockheat(["plan", "check", plan["plan_id"], "--now", NOW])) != 0:
        return code
    print(plan["plan_id"], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
