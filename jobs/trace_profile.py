"""Spark application: the trace profile (`trace_profile`)."""
from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from blockheat.libs.io.session import SparkConfig, build_session
from blockheat.libs.io.tables import trace_info
from blockheat.libs.table_io.profile import profile_trace

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def run(spark: SparkSession, cfg: SparkConfig, trace_id: str, *, window_us: int = 3_600_000_000,
        extent_bytes: int = 1 << 20, full: bool = False) -> int:
    """Replaces the trace's profile rows (after an append, from the stored partial aggregates and the new
    requests; full: from the whole trace); returns how many were written."""
    span_us = int(trace_info(spark, cfg.warehouse, trace_id)["span_us"])
    log.info("profile: %s (window %g s)", trace_id, window_us / 1e6)
    return profile_trace(spark, cfg.warehouse, trace_id, span_us=span_us, window_us=window_us,
                         extent_bytes=extent_bytes, full=full)


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit entry point."""
    parser = argparse.ArgumentParser(prog="trace_profile", description=__doc__)
    parser.add_argument("trace_id")
    parser.add_argument("--window", type=float, default=3600.0, help="seconds")
    parser.add_argument("--full", action="store_true", help="profile the whole trace (not only what an append added)")
    args = parser.parse_args(argv)
    cfg = SparkConfig.from_env("trace_profile", lean_local=True)   # the passes run in Python workers
    run(build_session(cfg), cfg, args.trace_id, window_us=round(args.window * 1e6), full=args.full)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
