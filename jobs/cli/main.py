"""The `blockheat` command: ingest traces, list the catalog, run Spark SQL over every table.

Errors are one line on stderr with a non-zero exit code; --debug shows the full traceback.
"""
from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Sequence
from typing import Any

from jobs.cli import alis, experiments, heat, plans, policies, sim, sql
from jobs.cli.common import CommandParser, UsageError, checked, emit, print_table, spark_session

EXIT_ERROR = 1
EXIT_USAGE = 2
# Modules that add subcommands (add_commands(subparsers)), in the order `blockheat --help` lists them. They are
# light: each imports its job only when its subcommand parses (CommandParser.defer) or runs.
COMMAND_MODULES = (heat, alis, sim, policies, experiments, sql, plans)
LAYOUT_FIELDS = ("ts", "device", "op", "offset", "size", "response", "queue")


def _unit_bytes(text: str) -> int:
    named = {"bytes": 1, "b": 1, "sectors": 512, "sector": 512, "blocks": 512, "kib": 1024}
    if text.lower() in named:
        return named[text.lower()]
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise UsageError(f"unit {text!r}: use bytes, sectors (512) or a positive number of bytes")


def csv_layout_from_args(args: argparse.Namespace) -> Any:
    """--csv-* options -> a validated CsvLayout."""
    from libs.readers.text_formats import custom_layout  # lazy: numpy loads only for `ingest --format csv`

    columns: dict[str, int] = {}
    for item in args.csv_columns.split(","):
        name, _, index = item.partition("=")
        name = name.strip()
        if name not in LAYOUT_FIELDS or not index.strip().isdigit():
            raise UsageError(f"--csv-columns item {item!r}: expected FIELD=INDEX with FIELD one of "
                             f"{', '.join(LAYOUT_FIELDS)} and INDEX a 0-based column number")
        columns[name] = int(index)
    options: dict[str, Any] = {
        "delimiter": r"\s+" if args.csv_delimiter in ("whitespace", "ws") else _regex_literal(args.csv_delimiter),
        "ts_unit": args.csv_ts_unit,
        "ts_epoch": None if args.csv_ts_epoch == "relative" else args.csv_ts_epoch,
        "offset_unit_bytes": _unit_bytes(args.csv_offset_unit),
        "size_unit_bytes": _unit_bytes(args.csv_size_unit),
        "response_unit": args.csv_response_unit,
        "queue_unit": args.csv_response_unit,
        "read_ops": tuple(s for s in args.csv_read_ops.split(",") if s),
        "write_ops": tuple(s for s in args.csv_write_ops.split(",") if s),
        "skip_header_lines": args.csv_skip_header,
        "comment_prefix": args.csv_comment or None,
    }
    if "device" not in columns:
        options["device_const"] = args.csv_device
    return checked(custom_layout, columns, **options)


def _regex_literal(delim: str) -> str:
    return re.escape(delim)


def _seconds(us: int) -> str:
    return f"{us / 1e6:,.3f} s" if us < 86_400_000_000 else f"{us / 86_400e6:,.3f} days"


def cmd_ingest(args: argparse.Namespace) -> int:
    # lazy: the ingest job, its pipeline and pyspark load only when `ingest` runs
    from jobs.ingest_trace import run
    from libs.ingest.pipeline import BINARY_FORMATS, IngestOptions, staging_location
    from libs.io.inputs import prefetch_digests

    layout = csv_layout_from_args(args) if args.format == "csv" else None
    if args.format != "csv" and args.csv_columns:
        raise UsageError("--csv-* options apply only to --format csv")
    tolerance = None if args.ts_tolerance_us.lower() == "none" else int(args.ts_tolerance_us)
    prefetch_digests(args.paths, args.format not in BINARY_FORMATS)    # hashed while the session starts
    spark, cfg = spark_session(args, f"ingest {args.trace_id}")
    opts = IngestOptions(args.format, args.trace_id, tuple(args.paths),
                         max_reject_share=args.max_reject_share, ts_tolerance_us=tolerance,
                         layout=layout, staging=staging_location(cfg.warehouse))
    summary = run(spark, cfg, opts)
    t = summary.trace
    out = sys.stdout
    out.write(f"\ningested trace {t['trace_id']} ({t['format']}): {t['records_read']:,} records read, "
              f"{t['records_accepted']:,} requests, {t['records_rejected']:,} rejected\n")
    if t["rejected_by_reason"]:
        out.write("rejected by reason: " + ", ".join(
            f"{k} {v:,}" for k, v in sorted(t["rejected_by_reason"].items())) + "\n")
    if t["start_time_source"]:
        out.write(f"trace start: {t['start_time_source']}\n")
    out.write(f"time span: {_seconds(t['span_us'])}\n\n")
    rows = [
        {"device": d["device"], "records": d["records"], "reads": d["reads"], "writes": d["writes"],
         "bytes": d["bytes"], "first_s": round(d["first_us"] / 1e6, 6),
         "last_s": round(d["last_us"] / 1e6, 6), "span": _seconds(d["last_us"] - d["first_us"])}
        for d in summary.per_device
    ]
    print_table(rows, ["device", "records", "reads", "writes", "bytes", "first_s", "last_s", "span"])
    out.write(f"\ntables: {cfg.warehouse}/{{requests,rejected_records,traces}} (Delta); "
              f"query them with: blockheat sql \"SELECT ... FROM requests WHERE trace_id = "
              f"'{t['trace_id']}'\"\n")
    return 0


def cmd_traces(args: argparse.Namespace) -> int:
    spark, cfg = spark_session(args, "traces")
    if not spark.catalog.tableExists("traces"):
        sys.stdout.write(f"no traces ingested yet (warehouse {cfg.warehouse})\n")
        return 0
    df = spark.sql(
        "SELECT trace_id, format, size(devices) AS devices, records_read, records_accepted, "
        "records_rejected, reads, writes, bytes_read + bytes_written AS bytes, "
        "round(span_us / 1e6, 3) AS span_s, start_time_utc, ingested_at "
        "FROM traces ORDER BY trace_id")
    return emit(df, args.json, limit=None)


def cmd_sql(args: argparse.Namespace) -> int:
    from libs.io.catalog import release_metastore  # lazy: pyspark loads only when `sql` runs

    spark, _ = spark_session(args, "sql", catalog="hive")  # the persistent catalog: users' views too
    code = emit(spark.sql(args.query), args.json, limit=args.limit)
    release_metastore(spark)       # not on errors: formatting a Spark error still needs the JVM
    return code


def cmd_jvm_archive(args: argparse.Namespace) -> int:
    from libs.io.jvm import archive_path, make_archive  # lazy: loads only when `jvm-archive` runs

    existed = archive_path().is_file() and not args.force
    path = make_archive(force=args.force)
    size = path.stat().st_size / 2**20
    sys.stdout.write(f"{'kept' if existed else 'made'} {path} ({size:.0f} MiB): Spark JVMs of this environment "
                     "start from it\n")
    return 0


def cmd_connect_server(args: argparse.Namespace) -> int:
    import os

    from libs.io.connect_server import server_command, server_env  # lazy: loads only when `connect-server` runs
    from libs.io.session import SparkConfig

    cfg = SparkConfig.from_env("blockheat-connect", short_driver=False)
    cmd = server_command(cfg, args.host, args.port)
    sys.stderr.write(f"Spark Connect on sc://{args.host}:{args.port} (warehouse {cfg.warehouse}); clients set "
                     f"BLOCKHEAT_SPARK_REMOTE=sc://{args.host}:{args.port}\n")
    os.execvpe(cmd[0], cmd, server_env(cfg))
    return 0


def _ingest_arguments(ing: argparse.ArgumentParser) -> None:
    """The options of `blockheat ingest`."""
    from libs.ingest.pipeline import FORMATS  # lazy: the ingest pipeline loads pyspark and numba

    ing.add_argument("--format", required=True, choices=FORMATS)
    ing.add_argument("--trace-id", required=True)
    ing.add_argument("paths", nargs="+", metavar="PATH")
    ing.add_argument("--max-reject-share", type=float, default=0.01,
                     help="fail when more than this share of records is rejected (default 0.01)")
    ing.add_argument("--ts-tolerance-us", default="1000000",
                     help="reject a record whose time goes back more than this (us), or 'none'")
    csv = ing.add_argument_group("--format csv (your own column layout)")
    csv.add_argument("--csv-columns", default="", help="FIELD=INDEX,... e.g. ts=0,device=1,op=2,offset=3,size=4")
    csv.add_argument("--csv-delimiter", default=",", help="a character, or 'whitespace'")
    csv.add_argument("--csv-ts-unit", default="us", choices=("s", "ms", "us", "ns", "filetime"))
    csv.add_argument("--csv-ts-epoch", default="relative", choices=("relative", "unix", "filetime"))
    csv.add_argument("--csv-offset-unit", default="bytes", help="bytes, sectors (512) or N bytes")
    csv.add_argument("--csv-size-unit", default="bytes", help="bytes, sectors (512) or N bytes")
    csv.add_argument("--csv-response-unit", default="us", choices=("s", "ms", "us", "ns", "filetime"))
    csv.add_argument("--csv-read-ops", default="R,r,Read,read", help="op values meaning read")
    csv.add_argument("--csv-write-ops", default="W,w,Write,write", help="op values meaning write")
    csv.add_argument("--csv-skip-header", type=int, default=0, help="header lines per file")
    csv.add_argument("--csv-comment", default="", help="prefix of comment lines, e.g. '#'")
    csv.add_argument("--csv-device", default="0", help="device name when no device column")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="blockheat", description="Block I/O traces -> layout decisions.")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks (Java too)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)

    ing = sub.add_parser("ingest", help="ingest trace files into the Delta tables").defer(_ingest_arguments)
    ing.set_defaults(func=cmd_ingest)

    tr = sub.add_parser("traces", help="list ingested traces")
    tr.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    tr.set_defaults(func=cmd_traces)

    sq = sub.add_parser("sql", help="run Spark SQL over every table by name")
    sq.add_argument("query")
    sq.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    sq.add_argument("--limit", type=int, default=1000, help="rows to print (0 = all)")
    sq.set_defaults(func=cmd_sql)

    cs = sub.add_parser("connect-server", help="run a Spark Connect server for BLOCKHEAT_SPARK_REMOTE clients")
    cs.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    cs.add_argument("--port", type=int, default=15002, help="port to listen on (default 15002)")
    cs.set_defaults(func=cmd_connect_server)

    jv = sub.add_parser("jvm-archive", help="make this environment's JVM class archive (faster Spark starts)")
    jv.add_argument("--force", action="store_true", help="make it again even if it exists")
    jv.set_defaults(func=cmd_jvm_archive)
    for module in COMMAND_MODULES:
        module.add_commands(sub)
    return parser


def _one_line(exc: BaseException) -> str:
    """The first meaningful line of an exception, without JVM stack frames."""
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("at ", "JVM stacktrace", "Traceback")):
            return line
    return type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if not args.debug else logging.DEBUG, stream=sys.stderr,
                        format="blockheat: %(message)s")
    for noisy in ("py4j", "numba"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        return int(args.func(args))
    except UsageError as exc:
        if args.debug:
            raise
        sys.stderr.write(f"blockheat: error: {exc}\n")
        return EXIT_USAGE
    except Exception as exc:
        if args.debug:
            raise
        sys.stderr.write(f"blockheat: error: {_one_line(exc)}\n")
        return EXIT_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
