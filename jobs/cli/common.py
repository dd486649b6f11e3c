"""What the `blockheat` subcommands share: the usage error, the Spark session, table and JSON output, and the
subcommand parser whose options are added when it parses. Imports no subcommand module."""
from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any, TypeVar

T = TypeVar("T")


class UsageError(ValueError):
    """Bad command-line values (exit code 2)."""


def checked(make: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """make(*args, **kwargs), a ValueError (a bad option value) raised as a UsageError."""
    try:
        return make(*args, **kwargs)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


class CommandParser(argparse.ArgumentParser):
    """A subcommand's parser. Options given to defer() are added only when this subcommand parses or prints its
    help, so that `blockheat --help` and the other subcommands do not import the job that owns them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deferred: list[Callable[[argparse.ArgumentParser], object]] = []

    def defer(self, add_arguments: Callable[[argparse.ArgumentParser], object]) -> CommandParser:
        """Call add_arguments(self) before this parser first parses or formats its usage or help."""
        self._deferred.append(add_arguments)
        return self

    def _add_deferred(self) -> None:
        while self._deferred:
            self._deferred.pop(0)(self)

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        self._add_deferred()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self._add_deferred()
        return super().format_usage()

    def format_help(self) -> str:
        self._add_deferred()
        return super().format_help()


def spark_session(args: argparse.Namespace, app: str, *, catalog: str = "in-memory") -> tuple[Any, Any]:
    """(SparkSession, SparkConfig) of the environment's settings, with this app name and catalog."""
    from libs.io.session import SparkConfig, build_session  # lazy: pyspark loads only for commands that use Spark

    cfg = replace(SparkConfig.from_env(app), catalog=catalog)
    return build_session(cfg), cfg


def _fmt(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def print_table(rows: list[dict[str, Any]], columns: Sequence[str], out: Any = None) -> None:
    """Aligned plain-text table (right-aligned numbers)."""
    out = out or sys.stdout
    cells = [[_fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(r.get(c), int | float | Decimal) or r.get(c) is None for r in rows)
               for c in columns]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric, strict=True)).rstrip()

    out.write(line(list(columns)) + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for row in cells:
        out.write(line(row) + "\n")


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return value.hex()
    if hasattr(value, "asDict"):
        return value.asDict(recursive=True)
    raise TypeError(f"cannot serialise {type(value).__name__}")


def emit(df: Any, as_json: bool, limit: int | None) -> int:
    """A DataFrame's rows (the first `limit` if given) as a table, or as JSON lines."""
    rows = df.limit(limit).collect() if limit else df.collect()
    dicts = [r.asDict(recursive=True) for r in rows]
    if as_json:
        for d in dicts:
            sys.stdout.write(json.dumps(d, default=_json_default) + "\n")
    else:
        print_table(dicts, df.columns)
        if limit and len(rows) == limit:
            sys.stdout.write(f"(first {limit} rows; --limit N for more)\n")
    return 0
