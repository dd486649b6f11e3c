"""The `blockheat` command: ingest traces, list the catalog, run Spark SQL over every table.

Errors are one line on stderr, whole, with exit code 1 (2 for bad options, 130 for Ctrl-C); --debug shows the full
traceback and the JVM's own output.
"""
from __future__ import annotations

import argparse
import datetime as dt
import gc
import logging
import os
import re
import sys
import traceback
import types
from collections.abc import Sequence
from typing import Any

from blockheat.jobs.cli import alis, console, experiments, heat, maintenance, plans, policies, sim, sql
from blockheat.jobs.cli.common import (
    CommandParser,
    HelpFormatter,
    OneLineErrors,
    UsageError,
    add_command,
    add_output_options,
    checked,
    example,
    output,
    spark_config,
    spark_session,
)
from blockheat.jobs.cli.faults import fault_message
from blockheat.jobs.cli.output import MICROSECONDS, human

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
TRACE_COLUMNS = ["trace_id", "format", "devices", "requests", "rejected", "reads", "writes", "bytes", "span_us",
                 "start", "ingested_at"]
# Modules that add subcommands (add_commands(subparsers)), in the order `blockheat --help` lists them. They are
# light: each imports its job only when its subcommand parses (CommandParser.defer) or runs.
COMMAND_MODULES = (heat, alis, sim, policies, experiments, sql, plans, maintenance)
LAYOUT_FIELDS = ("ts", "device", "op", "offset", "size", "response", "queue")
#: --lock-wait's default: libs.io.lease.DEFAULT_WAIT_S (not imported here: it loads pyarrow; a test keeps them equal).
LOCK_WAIT_S = 600.0

log = logging.getLogger(__name__)


def _unit_bytes(text: str) -> int:
    named = {"bytes": 1, "b": 1, "sectors": 512, "sector": 512, "blocks": 512, "kib": 1024}
    if text.lower() in named:
        return named[text.lower()]
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise UsageError(f"unit {text!r}: use bytes, sectors (512) or a positive number of bytes")


def csv_layout_from_args(args: argparse.Namespace) -> Any:
    """--csv-* options -> a validated CsvLayout."""
    from blockheat.libs.readers.text_formats import custom_layout  # lazy: numpy loads only for `ingest --format csv`

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


def cmd_ingest(args: argparse.Namespace) -> int:
    # lazy: the ingest job, its pipeline and pyspark load only when `ingest` runs
    from blockheat.jobs.ingest_trace import run
    from blockheat.libs.ingest.pipeline import BINARY_FORMATS, IngestOptions, staging_location
    from blockheat.libs.io.inputs import check_path, prefetch_digests

    layout = csv_layout_from_args(args) if args.format == "csv" else None
    if args.format != "csv" and args.csv_columns:
        raise UsageError("--csv-* options apply only to --format csv")
    tolerance = None if args.ts_tolerance_us.lower() == "none" else int(args.ts_tolerance_us)
    for given in args.paths:                # a missing or unreadable input is refused before Spark starts
        check_path(given)
    prefetch_digests(args.paths, args.format not in BINARY_FORMATS)    # hashed while the session starts
    spark, cfg = spark_session(args, f"ingest {args.trace_id}", trace_id=args.trace_id if args.append else None)
    opts = IngestOptions(args.format, args.trace_id, tuple(args.paths),
                         max_reject_share=args.max_reject_share, ts_tolerance_us=tolerance,
                         layout=layout, staging=staging_location(cfg.warehouse), append=args.append,
                         allow_overlap=args.allow_overlap, max_expanded_bytes=args.max_expanded_bytes,
                         lock_wait_s=args.lock_wait)
    summary = run(spark, cfg, opts)
    t = summary.trace
    out = output(args)
    if args.append:
        added = sum(d["records"] for d in summary.per_device)
        out.note(f"appended {len(args.paths)} file(s), {added:,} requests, to trace {t['trace_id']} ({t['format']})")
    what = "trace now" if args.append else f"ingested trace {t['trace_id']} ({t['format']})"
    out.note(f"{what}: {t['records_read']:,} records read, {t['records_accepted']:,} requests, "
             f"{t['records_rejected']:,} rejected")
    if t["rejected_by_reason"]:
        out.note("rejected by reason: " + ", ".join(f"{k} {v:,}" for k, v in sorted(t["rejected_by_reason"].items())))
    out.note(f"trace start: {t['start_time_source'] or 'unknown (relative times)'}")
    out.note(f"time span: {human(t['span_us'], MICROSECONDS)}\n")
    rows = [{"device": d["device"], "records": d["records"], "reads": d["reads"], "writes": d["writes"],
             "bytes": d["bytes"], "first_us": d["first_us"], "last_us": d["last_us"],
             "span_us": d["last_us"] - d["first_us"]} for d in summary.per_device]
    out.rows(rows, ["device", "records", "reads", "writes", "bytes", "first_us", "last_us", "span_us"],
             name="devices")
    out.note(f"\ntables: {cfg.warehouse}/{{requests,rejected_records,traces}} (Delta); query them with: blockheat "
             f"sql \"SELECT ... FROM requests WHERE trace_id = '{t['trace_id']}'\"")
    return out.render()


def cmd_traces(args: argparse.Namespace) -> int:
    """The `traces` catalog read by delta-rs: no Spark session, with or without `blockheat serve` (through Spark
    only when delta-rs cannot read the table's files as they are, e.g. deletion vectors)."""
    from blockheat.libs.io import delta_log, storage  # lazy: pyarrow and delta-rs load only when `traces` runs

    warehouse = storage.warehouse_from_env()
    out = output(args)
    root = storage.join(storage.normalize(warehouse), "traces")
    if not delta_log.is_table(root):
        out.note(f"no traces ingested yet (warehouse {warehouse})")
        out.rows([], TRACE_COLUMNS, name="traces")
        return out.render()
    try:
        table = delta_log.read(root, TRACE_SOURCE_COLUMNS)
    except delta_log.LogUnreadable:
        return _traces_by_spark(args)
    rows = sorted((trace_row(r) for r in delta_log.rows(table)), key=lambda r: r["trace_id"])
    out.rows(rows, TRACE_COLUMNS, name="traces")
    return out.render()


TRACE_SOURCE_COLUMNS = ["trace_id", "format", "devices", "records_accepted", "records_rejected", "reads", "writes",
                        "bytes_read", "bytes_written", "span_us", "start_time_utc", "start_time_source", "ingested_at"]


def trace_row(row: dict[str, Any]) -> dict[str, Any]:
    """A `traces` row as the command lists it. start: UTC when the source says its zone, else the source's own
    words, else relative times only."""
    start, ingested = (_utc(row[c]) for c in ("start_time_utc", "ingested_at"))
    return {"trace_id": row["trace_id"], "format": row["format"], "devices": len(row["devices"]),
            "requests": row["records_accepted"], "rejected": row["records_rejected"], "reads": row["reads"],
            "writes": row["writes"], "bytes": row["bytes_read"] + row["bytes_written"], "span_us": row["span_us"],
            "start": start.strftime("%Y-%m-%dT%H:%M:%SZ") if start is not None else
            row["start_time_source"] or "unknown (relative times)",
            "ingested_at": ingested}


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    """A timestamp as an aware UTC datetime (Spark's collect() gives the local time, naive)."""
    return value.astimezone(dt.UTC) if value is not None else None


def _traces_by_spark(args: argparse.Namespace) -> int:
    spark, _ = spark_session(args, "traces")
    rows = spark.sql(f"SELECT {', '.join(TRACE_SOURCE_COLUMNS)} FROM traces").collect()
    out = output(args)
    out.rows(sorted((trace_row(r.asDict()) for r in rows), key=lambda r: r["trace_id"]), TRACE_COLUMNS,
             name="traces")
    return out.render()


def cmd_sql(args: argparse.Namespace) -> int:
    if args.limit < 0:
        raise UsageError(f"--limit must be >= 0, got {args.limit}")
    answered = None if args.allow_writes or args.debug else _sql_on_server(args.query, args.limit)
    if answered is not None:
        columns, rows = answered
        return _sql_result(args, columns, rows)
    from blockheat.libs.io.catalog import release_metastore  # lazy: pyspark loads only when `sql` starts a session

    # the persistent catalog: users' views too
    spark, _ = spark_session(args, "sql", catalog="hive", read_only=True)
    df = spark.sql(args.query)
    rows = df.limit(args.limit + 1).collect() if args.limit else df.collect()
    columns = list(rows[0].__fields__) if rows else df.columns      # a served client: one round trip less
    dicts = [r.asDict(recursive=True) for r in rows]
    release_metastore(spark)       # not on errors: formatting a Spark error still needs the JVM
    return _sql_result(args, columns, dicts)


def _sql_result(args: argparse.Namespace, columns: list[str], rows: list[dict[str, Any]]) -> int:
    """Print a statement's rows (one more than --limit fetched: whether there are more)."""
    more = args.limit and len(rows) > args.limit
    out = output(args)
    out.rows(rows[:args.limit or None], columns, name="result",
             more=f"the first {args.limit:,}; --limit 0 for all" if more else None)
    return out.render()


def _sql_on_server(query: str, limit: int) -> tuple[list[str], list[dict[str, Any]]] | None:
    """(columns, rows) of a read-only statement answered by the warehouse's running `blockheat serve` through
    libs.io.connect_sql, which loads neither pyspark nor pandas; None when no server is attached, or when the
    statement needs pyspark's client (a result type it converts to its own classes, an error for it to word)."""
    from blockheat.libs.io import endpoint, storage  # lazy: see cmd_traces

    warehouse = storage.warehouse_from_env()
    found = endpoint.attached_with_token(warehouse)
    if found is None:
        return None
    from blockheat.libs.io import connect_sql, sql_access

    running, token = found
    try:
        return connect_sql.run(running.connect, token, query, sql_access.client_conf(allow_writes=False),
                               limit=limit + 1 if limit else None)
    except connect_sql.Unsupported as exc:
        log.debug("the statement runs through pyspark's Connect client: %s", exc)
        return None


def cmd_jvm_archive(args: argparse.Namespace) -> int:
    from blockheat.libs.io.jvm import archive_path, make_archive  # lazy: loads only when `jvm-archive` runs

    existed = archive_path().is_file() and not args.force
    with console.quiet_stderr(filtered=not args.debug):
        path = make_archive(force=args.force)
    sys.stdout.write(f"{'kept' if existed else 'made'} {path} ({human(path.stat().st_size, 'bytes')}): Spark JVMs "
                     "of this environment start from it\n")
    return 0


def cmd_connect_server(args: argparse.Namespace) -> int:
    """A Spark Connect server that only holders of the warehouse's token (a file only its owner may read) use."""
    from blockheat.libs.io import sql_access  # lazy: loads only when `connect-server` runs
    from blockheat.libs.io.connect_server import server_command, server_env

    cfg = spark_config(args, "blockheat-connect", catalog="none", short_driver=False, attach=False)
    secrets = sql_access.ServerSecrets.ensure(cfg.warehouse)
    with console.quiet_stderr(filtered=not args.debug):       # the jar resolution of a first start, too
        cmd = server_command(cfg, args.host, args.port)
    token_file = sql_access.serve_dir(cfg.warehouse) / sql_access.TOKEN_FILE
    console.write_stderr(f"Spark Connect on {args.host}:{args.port} (warehouse {cfg.warehouse}), token required; "
                         f"clients set BLOCKHEAT_SPARK_REMOTE=\"sc://localhost:{args.port}/;token=$(cat {token_file})\""
                         "; Ctrl-C stops it\n")
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        console.write_stderr("note: pyspark sends the token without TLS only to localhost: remote clients reach this "
                             "server through a tunnel to their own localhost (ssh -L)\n")
    return console.run_child(cmd, server_env(cfg, {sql_access.TOKEN_ENV: secrets.token}), quiet=not args.debug,
                             server=True)


def demo_commands() -> list[list[str]]:
    """What `blockheat demo` runs, in order: the bundled real trace (shipped with the package) ingested, the catalog,
    the report."""
    from blockheat.data import HPLAJW_TRACE

    return [["ingest", "--format", "hp-srt", "--trace-id", "hplajw", str(HPLAJW_TRACE)], ["traces"],
            ["report", "hplajw"]]


def cmd_demo(args: argparse.Namespace) -> int:
    for argv in demo_commands():
        code = main([*(["--debug"] if args.debug else []), *argv])
        if code:
            return code
    return 0


def _ingest_arguments(ing: argparse.ArgumentParser) -> None:
    """The options of `blockheat ingest`."""
    from blockheat.libs.ingest.pipeline import FORMATS  # lazy: the ingest pipeline loads pyspark and numba

    ing.add_argument("--format", required=True, choices=FORMATS, metavar="FMT",
                     help=f"the trace format: {', '.join(FORMATS)} (docs/ingest.md)")
    ing.add_argument("--trace-id", required=True, metavar="ID",
                     help="the trace's name in every table (letters, digits and _ . : -); an existing one is replaced")
    ing.add_argument("paths", nargs="+", metavar="PATH",
                     help="trace files (local paths or URIs; gzip, bzip2 or zstd compressed too): together one trace")
    ing.add_argument("--append", action="store_true",
                     help="add the files to the existing trace ID (continuing its seq numbers and time) instead of "
                          "replacing it; a file already in the trace is refused")
    ing.add_argument("--allow-overlap", action="store_true",
                     help="with --append: accept files that start before the trace's end (the requests files they "
                          "reach into are re-sorted)")
    ing.add_argument("--max-reject-share", type=float, default=0.01,
                     help="fail, writing nothing, when more than this share of records is rejected")
    ing.add_argument("--ts-tolerance-us", default="1000000",
                     help="reject a record whose time goes back more than this (us), or 'none'")
    ing.add_argument("--max-expanded-bytes", type=int, default=None, metavar="N",
                     help="refuse a compressed file that decompresses to more than N bytes (default per file: "
                          "1,000 x its compressed size, at least 1 GiB)")
    ing.add_argument("--lock-wait", type=float, default=LOCK_WAIT_S, metavar="SECONDS",
                     help="how long to wait for another ingest of the same trace id to finish before refusing "
                          f"(ingests of one id run one at a time; default {LOCK_WAIT_S:g})")
    add_output_options(ing, format_flag=False)
    csv = ing.add_argument_group("--format csv (your own column layout)")
    csv.add_argument("--csv-columns", default="", help="FIELD=INDEX,... e.g. ts=0,device=1,op=2,offset=3,size=4")
    csv.add_argument("--csv-delimiter", default=",", help="a character, or 'whitespace'")
    csv.add_argument("--csv-ts-unit", default="us", choices=("s", "ms", "us", "ns", "filetime"),
                     help="unit of the time column")
    csv.add_argument("--csv-ts-epoch", default="relative", choices=("relative", "unix", "filetime"),
                     help="what time 0 is: the trace's start, the Unix epoch or Windows' FILETIME epoch")
    csv.add_argument("--csv-offset-unit", default="bytes", help="bytes, sectors (512) or N bytes")
    csv.add_argument("--csv-size-unit", default="bytes", help="bytes, sectors (512) or N bytes")
    csv.add_argument("--csv-response-unit", default="us", choices=("s", "ms", "us", "ns", "filetime"),
                     help="unit of the response and queue time columns")
    csv.add_argument("--csv-read-ops", default="R,r,Read,read", help="op values meaning read")
    csv.add_argument("--csv-write-ops", default="W,w,Write,write", help="op values meaning write")
    csv.add_argument("--csv-skip-header", type=int, default=0, help="header lines per file")
    csv.add_argument("--csv-comment", default="", help="prefix of comment lines, e.g. '#'")
    csv.add_argument("--csv-device", default="0", help="device name when no device column")


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # lazy: only --version asks (a few hundredths)

    try:
        return version("blockheat")
    except PackageNotFoundError:          # run from a source tree that is not installed
        return "unknown (not installed)"


class VersionAction(argparse.Action):
    """--version: the installed package's version, looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help=kwargs.get("help", "show the version and exit"))

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        sys.stdout.write(f"blockheat {package_version()}\n")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrors(
        prog="blockheat", description="Block I/O traces -> layout decisions.", formatter_class=HelpFormatter,
        epilog=example("blockheat ingest --format hp-srt --trace-id hplajw data/traces/hplajw/ajw.1week.srt",
                       "blockheat report hplajw", "blockheat COMMAND --help"))
    parser.add_argument("--version", action=VersionAction)
    parser.add_argument("--debug", action="store_true",
                        help="full tracebacks (Java ones too) and the Spark JVM's own log output")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser, metavar="COMMAND")

    dm = add_command(sub, "demo", "ingest the bundled real trace (hplajw), list the catalog, write its report",
                     "blockheat demo",
                     description="Runs `blockheat ingest --format hp-srt --trace-id hplajw` on the HP trace shipped "
                                 "with the package (one week of the workstation hplajw, 1992), then `blockheat "
                                 "traces` and `blockheat report hplajw`, into the warehouse (BLOCKHEAT_WAREHOUSE, "
                                 "default ./warehouse).")
    dm.set_defaults(func=cmd_demo)

    ing = add_command(sub, "ingest", "ingest trace files into the Delta tables",
                      "blockheat ingest --format hp-srt --trace-id hplajw data/traces/hplajw/ajw.1week.srt",
                      description="Reads trace files of one format into the requests, rejected_records and traces "
                                  "tables as one trace; re-ingesting a trace id replaces it, --append adds to it. "
                                  "Prints the trace's "
                                  "records, rejects and time span, and a row per device.")
    ing.defer(_ingest_arguments).set_defaults(func=cmd_ingest)

    tr = add_command(sub, "traces", "list the ingested traces", "blockheat traces --format csv")
    add_output_options(tr)
    tr.set_defaults(func=cmd_traces)

    sq = add_command(sub, "sql", "run one Spark SQL statement over every table by name",
                     'blockheat sql "SELECT device, count(*) AS n FROM requests GROUP BY device"',
                     description="Runs one Spark SQL statement over every table by name and prints its rows. "
                                 "Read-only unless --allow-writes: queries, views, SHOW, DESCRIBE, EXPLAIN and "
                                 "history run; statements that change tables, scripts (TRANSFORM), Java calls "
                                 "(reflect) and queries on files are refused before they run.")
    sq.add_argument("query", metavar="SQL", help="one statement (tables by name: docs/tables.md)")
    sq.add_argument("--limit", type=int, default=1000, help="rows to print (0: all)")
    sq.add_argument("--allow-writes", action="store_true",
                    help="let the statement change tables (INSERT, DELETE, UPDATE, MERGE, DDL); without it only "
                         "queries, views, SHOW, DESCRIBE, EXPLAIN and history run")
    add_output_options(sq)
    sq.set_defaults(func=cmd_sql)

    cs = add_command(sub, "connect-server", "run a Spark Connect server for BLOCKHEAT_SPARK_REMOTE clients",
                     "blockheat connect-server --port 15002")
    cs.add_argument("--host", default="127.0.0.1", help="address to listen on")
    cs.add_argument("--port", type=int, default=15002, help="port to listen on")
    cs.set_defaults(func=cmd_connect_server)

    jv = add_command(sub, "jvm-archive", "make this environment's JVM class archive (faster Spark starts)",
                     "blockheat jvm-archive --force")
    jv.add_argument("--force", action="store_true", help="make it again even if it exists")
    jv.set_defaults(func=cmd_jvm_archive)
    for module in COMMAND_MODULES:
        module.add_commands(sub)
    return parser


# Where a Spark or py4j error's message ends and its stack or plan begins.
_MESSAGE_END = re.compile(r"^\s*(JVM stacktrace:|at [\w$.]+\(|Traceback \(most recent call last\)|== \w[\w ]*==$|"
                          r"'?[A-Z]\w* \[|\+- |:- )")


def error_message(exc: BaseException) -> str:
    """An exception's whole message on one line: every line of it up to a JVM stack, a Python traceback or a
    query plan, joined by spaces."""
    lines = []
    for line in str(exc).strip().splitlines():
        if _MESSAGE_END.match(line):
            break
        if line.strip():
            lines.append(line.strip())
    return " ".join(lines).rstrip(";") or type(exc).__name__


def finish_commits() -> None:
    """Before a command reads anything: finish the multi-table commits a stopped ingest decided (libs.io.journal),
    so it sees each trace whole; raises JournalError when one cannot be finished. A local warehouse without journal
    entries costs one directory read and no import."""
    where = os.environ.get("BLOCKHEAT_WAREHOUSE", "warehouse")
    if "://" not in where and not _has_entries(os.path.join(where, "_journal")):
        return
    from blockheat.libs.io import journal, storage  # lazy: see above

    journal.finish(storage.warehouse_from_env())


def _has_entries(folder: str) -> bool:
    try:
        with os.scandir(folder) as entries:
            return next(entries, None) is not None
    except (FileNotFoundError, NotADirectoryError):
        return False


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    console.configure_logging(args.debug)
    try:
        finish_commits()
        return int(args.func(args))
    except UsageError as exc:
        if args.debug:
            raise
        console.write_stderr(f"blockheat: error: {exc}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        if args.debug:
            raise
        console.write_stderr("blockheat: interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:
        if args.debug:
            raise
        fault = fault_message(exc, os.environ.get("BLOCKHEAT_WAREHOUSE", "warehouse"))
        if fault and (situation := getattr(exc, "situation", None)):    # e.g. libs.io.journal's: what it means
            fault = f"{situation}: {fault}"
        console.write_stderr(f"blockheat: error: {fault or error_message(exc)}\n")
        return EXIT_ERROR
    finally:
        console.stop_progress()


def _masked_traceback(kind: type[BaseException], exc: BaseException, tb: types.TracebackType | None) -> None:
    """The traceback a --debug run ends with, its secrets masked (libs.io.redaction) as in every other line."""
    console.write_stderr("".join(traceback.format_exception(kind, exc, tb)))


def run() -> int:
    """The `blockheat` executable: main() with the collector tuned for a short-lived command. The imports of a
    Spark Connect client or delta-rs make ~10^6 long-lived objects; scanning them again at every collection and
    at exit costs ~0.5 s of a one-second command, so collections are rarer and what is left at exit is frozen."""
    gc.set_threshold(50_000, 20, 20)
    sys.excepthook = _masked_traceback
    code = main()
    gc.freeze()
    return code


if __name__ == "__main__":
    raise SystemExit(run())
