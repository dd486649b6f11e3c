"""Spark application: ingest one trace's files into `requests`, `rejected_records` and `traces`."""
from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from blockheat.libs.ingest.pipeline import (
    BINARY_FORMATS,
    FORMATS,
    IngestOptions,
    load_trace,
    staging_location,
    write_trace,
)
from blockheat.libs.io.inputs import prefetch_digests
from blockheat.libs.io.lease import DEFAULT_WAIT_S, acquire
from blockheat.libs.io.session import SparkConfig, build_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IngestSummary:
    """What an ingest wrote: the catalog row and per-device totals."""

    trace: dict[str, Any]
    per_device: list[dict[str, Any]]


def run(spark: SparkSession, cfg: SparkConfig, opts: IngestOptions) -> IngestSummary:
    """Load, check and write one trace: its three tables all or nothing (write_trace), holding the trace's lease
    (libs.io.lease) throughout, so ingests of one trace id run one after the other (LockBusy after
    opts.lock_wait_s; LeaseLost, nothing more committed, when it was stopped past its lease and another took over).
    """
    with acquire(cfg.warehouse, opts.trace_id, wait_s=opts.lock_wait_s) as lease:
        result = load_trace(spark, opts, cfg.warehouse, lease)
        try:
            write_trace(spark, cfg.warehouse, result)
        finally:
            result.release()
    return IngestSummary(result.trace_row, result.per_device)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ingest_trace", description=__doc__)
    parser.add_argument("--format", required=True, choices=FORMATS)
    parser.add_argument("--trace-id", required=True)
    parser.add_argument("--append", action="store_true", help="add the files to the existing trace")
    parser.add_argument("--allow-overlap", action="store_true",
                        help="with --append: accept files starting before the trace's end")
    parser.add_argument("--max-expanded-bytes", type=int, default=None,
                        help="the most a compressed file may decompress to (default: 1,000 x its size, >= 1 GiB)")
    parser.add_argument("--lock-wait", type=float, default=DEFAULT_WAIT_S, metavar="SECONDS",
                        help="how long to wait for another ingest of the same trace id before refusing")
    parser.add_argument("paths", nargs="+")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit entry point (the CLI's `blockheat ingest` has the full option set)."""
    args = parse_args(argv)
    prefetch_digests(args.paths, args.format not in BINARY_FORMATS)    # hashed while the session starts
    cfg = SparkConfig.from_env("ingest_trace")
    opts = IngestOptions(args.format, args.trace_id, tuple(args.paths),
                         staging=staging_location(cfg.warehouse), append=args.append,
                         allow_overlap=args.allow_overlap, max_expanded_bytes=args.max_expanded_bytes,
                         lock_wait_s=args.lock_wait)
    spark = build_session(cfg)
    run(spark, cfg, opts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
