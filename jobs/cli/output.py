"""How the `blockheat` subcommands print rows: `--format table` (aligned, numbers with units and thousands
separators, a `(N rows)` footer), `markdown` (the same cells as a Markdown table), `csv` and `json` (JSON lines),
both with exact values. Notes and titles are for people: table and markdown only.

    out = Output("table")
    out.rows([{"device": "0", "bytes": 167766016, "mean_ms": 53.58758}], ["device", "bytes", "mean_ms"])
    out.render()      # device  bytes    mean_ms / ------ ... / 0  160 MiB  53.6 ms / (1 row)
"""
from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TextIO

FORMATS = ("table", "csv", "json", "markdown")
HUMAN_FORMATS = ("table", "markdown")
# Units a cell can be shown in: bytes in KiB/MiB/GiB, durations in the unit that reads best, shares and signed
# changes as percentages.
BYTES, MICROSECONDS, MILLISECONDS, SECONDS, SHARE, CHANGE = "bytes", "us", "ms", "s", "share", "change"
_UNIT_SECONDS = {MICROSECONDS: 1e-6, MILLISECONDS: 1e-3, SECONDS: 1.0}
# Column names that carry their unit (the tables' convention: size_bytes, ts_us, mean_response_ms, span_s); a
# rate such as heat_blocks_s or rate_per_s is not a duration.
_UNIT_NAMES = ((re.compile(r"(^|_)bytes$"), BYTES), (re.compile(r"_share$"), SHARE),
               (re.compile(r"_us$"), MICROSECONDS), (re.compile(r"_ms$"), MILLISECONDS),
               (re.compile(r"(?<!_per)(?<!_blocks)_s$"), SECONDS))
# Integer columns that name something rather than count it: no thousands separators.
_ID_NAMES = re.compile(r"(^|_)id$|^(device|rank|k|step|interval|window)$")
_BINARY = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def unit_of(column: str) -> str | None:
    """The unit a column's name gives its numbers (None: a plain number)."""
    for pattern, unit in _UNIT_NAMES:
        if pattern.search(column):
            return unit
    return None


def significant(x: float, digits: int) -> str:
    """`x` to at most `digits` significant digits in fixed notation with thousands separators (53.6, 0.0353,
    1,235, 2.5)."""
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    magnitude = math.floor(math.log10(abs(x)))
    if abs(x) < 1e-4:
        return f"{x:.{digits - 1}e}"
    decimals = max(0, digits - 1 - magnitude)
    text = f"{x:,.{decimals}f}"
    if decimals and abs(float(text.replace(",", ""))) >= 10 ** (magnitude + 1):   # 99.96 rounds to 100.0
        text = f"{x:,.{decimals - 1}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def human_bytes(n: float) -> str:
    """Bytes as 512 B, 8.29 MiB, 160 MiB, 1.5 GiB (three significant digits, binary units)."""
    if abs(n) < 1024:
        return f"{n:,.0f} B"
    value, unit = float(n), "B"
    for unit in _BINARY:
        value /= 1024
        if abs(value) < 1024 or unit == _BINARY[-1]:
            break
    return f"{significant(value, 3)} {unit}"


def human_seconds(s: float) -> str:
    """A duration in the unit that reads best: 512 µs, 53.6 ms, 4.2 s, 12.5 min, 3.1 h, 6.98 days."""
    a = abs(s)
    if a == 0:
        return "0 s"
    for limit, scale, unit in ((1e-3, 1e6, "µs"), (1.0, 1e3, "ms"), (60.0, 1.0, "s"), (3600.0, 1 / 60, "min"),
                               (86_400.0, 1 / 3600, "h")):
        if a < limit:
            return f"{significant(s * scale, 3)} {unit}"
    return f"{significant(s / 86_400, 3)} days"


def human(value: Any, unit: str | None = None, *, identifier: bool = False) -> str:
    """One cell as people read it: NULL, thousands separators, units, timestamps to the second."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        value = float(value)
    if isinstance(value, int | float) and unit == BYTES:
        return human_bytes(value)
    if isinstance(value, int | float) and unit in (SHARE, CHANGE):
        return f"{value:{'+' if unit == CHANGE else ''}.1%}"
    if isinstance(value, int | float) and unit in _UNIT_SECONDS:
        return human_seconds(value * _UNIT_SECONDS[unit])
    if isinstance(value, int):
        return str(value) if identifier else f"{value:,}"
    if isinstance(value, float):
        return significant(value, 4)
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S") + (" UTC" if value.tzinfo is not None else "")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, default=exact_default, separators=(", ", ": "))
    return str(value)


def exact_default(value: Any) -> Any:
    """JSON for what json cannot write itself: timestamps ISO-8601, decimals as strings, bytes as hex, Rows."""
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return value.hex()
    if hasattr(value, "asDict"):
        return value.asDict(recursive=True)
    raise TypeError(f"cannot serialise {type(value).__name__}")


def exact(value: Any) -> str:
    """One CSV cell: the exact value (empty for NULL; timestamps ISO-8601; arrays and maps as JSON)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, default=exact_default)
    return str(value)


@dataclass
class Rows:
    """One table of a command's output. units: a column's unit where its name does not say it (None: a plain
    number); cell_unit: a unit per cell, for tables whose rows are metrics (the trace profile)."""

    rows: list[dict[str, Any]]
    columns: list[str]
    name: str = "rows"
    title: str | None = None
    units: Mapping[str, str | None] = field(default_factory=dict)
    cell_unit: Callable[[dict[str, Any], str], str | None] | None = None
    more: str | None = None                # footer note when only the first rows are shown

    def unit(self, row: dict[str, Any], column: str) -> str | None:
        if self.cell_unit is not None:
            return self.cell_unit(row, column)
        return self.units[column] if column in self.units else unit_of(column)

    def cells(self) -> list[list[str]]:
        return [[human(r.get(c), self.unit(r, c), identifier=bool(_ID_NAMES.search(c))) for c in self.columns]
                for r in self.rows]

    def numeric(self) -> list[bool]:
        """Per column: every value a number (right-aligned)."""
        return [all((isinstance(r.get(c), int | float | Decimal) and not isinstance(r.get(c), bool))
                    or r.get(c) is None for r in self.rows) for c in self.columns]


def _plain(value: Any) -> Any:
    """A numpy scalar (jobs' summaries hold some) as the Python number it is."""
    return value.item() if type(value).__module__ == "numpy" and hasattr(value, "item") else value


def footer(n: int, more: str | None = None) -> str:
    return f"({n:,} row{'' if n == 1 else 's'}{'; ' + more if more else ''})"


def render_table(t: Rows) -> str:
    """Aligned plain text: header, rule, rows (numbers right-aligned), `(N rows)`."""
    cells = t.cells()
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(t.columns)]
    numeric = t.numeric()

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric, strict=True)).rstrip()

    lines = [line(t.columns), "  ".join("-" * w for w in widths), *(line(row) for row in cells)]
    return "\n".join(lines) + "\n" + footer(len(t.rows), t.more) + "\n"


def render_markdown(t: Rows) -> str:
    """A GitHub-flavoured Markdown table of the same cells as the plain table."""
    def row(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.replace("|", "\\|") for v in values) + " |"

    rule = ["---:" if num else "---" for num in t.numeric()]
    return "\n".join([row(t.columns), "|" + "|".join(rule) + "|", *(row(r) for r in t.cells())]) + "\n"


def render_csv(t: Rows) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(t.columns)
    writer.writerows([exact(r.get(c)) for c in t.columns] for r in t.rows)
    return buffer.getvalue()


def render_json(t: Rows, table_key: bool) -> str:
    """JSON lines, one object per row with exact values; with `table_key`, each names its table."""
    return "".join(json.dumps({**({"table": t.name} if table_key else {}), **{c: r.get(c) for c in t.columns}},
                              default=exact_default) + "\n" for r in t.rows)


class Output:
    """A command's output, printed by render() in one format: tables, and notes for people (table and markdown
    only). With several tables, CSV separates them by an empty line and each JSON line has a "table" key."""

    def __init__(self, fmt: str = "table", stream: TextIO | None = None,
                 before_render: Callable[[], None] | None = None) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"output format must be one of {', '.join(FORMATS)}, got {fmt!r}")
        self.fmt = fmt
        self.stream = stream
        self.before_render = before_render
        self.items: list[Rows | str] = []

    @property
    def human(self) -> bool:
        return self.fmt in HUMAN_FORMATS

    def note(self, text: str) -> None:
        """A line (or lines; a leading or trailing newline is an empty line) for people, printed in table and
        markdown form only."""
        self.items.append(text)

    def rows(self, rows: Sequence[Mapping[str, Any]], columns: Sequence[str], **options: Any) -> None:
        """A table of `rows` (dicts) showing `columns`; options as Rows (name, title, units, cell_unit, more)."""
        self.items.append(Rows([{k: _plain(v) for k, v in r.items()} for r in rows], list(columns), **options))

    def render(self) -> int:
        """Print everything to stdout (or the stream given); returns 0, a command's exit code."""
        if self.before_render is not None:
            self.before_render()
        out = self.stream or sys.stdout
        tables = [i for i in self.items if isinstance(i, Rows)]
        first = True
        for item in self.items:
            if isinstance(item, str):
                if self.human:
                    out.write(item + "\n")
                continue
            if self.fmt == "json":
                out.write(render_json(item, table_key=len(tables) > 1))
                continue
            if not first and self.fmt == "csv":
                out.write("\n")
            if self.human and item.title:
                out.write(item.title.rstrip("\n") + "\n")
            out.write({"table": render_table, "markdown": render_markdown, "csv": render_csv}[self.fmt](item))
            first = False
        out.flush()
        return 0
