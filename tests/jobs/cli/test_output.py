"""jobs.cli.output: numbers with units for people, exact values for machines, the same rows in every format."""
from __future__ import annotations

import csv
import datetime as dt
import io
import json

import pytest

from blockheat.jobs.cli.output import Output, human, human_bytes, human_seconds, significant, unit_of


@pytest.mark.parametrize(("value", "digits", "text"), [
    (53.58758231116253, 3, "53.6"), (0.0353, 3, "0.0353"), (1234.5678, 4, "1,235"), (99.96, 3, "100"),
    (2.5, 3, "2.5"), (0, 3, "0"), (-8.2891, 3, "-8.29"), (123456789.0, 4, "123,456,789"),
])
def test_significant_digits_without_exponents(value, digits, text):
    assert significant(value, digits) == text


def test_bytes_and_durations_read_as_people_write_them():
    assert [human_bytes(n) for n in (0, 512, 4608, 167766016, 254613504, 3 << 40)] == \
        ["0 B", "512 B", "4.5 KiB", "160 MiB", "243 MiB", "3 TiB"]
    assert [human_seconds(s) for s in (0, 512e-6, 0.05358758, 4.2, 750, 11_160, 603_065)] == \
        ["0 s", "512 µs", "53.6 ms", "4.2 s", "12.5 min", "3.1 h", "6.98 days"]
    assert human(53.58758231116253, "ms") == "53.6 ms"
    assert human(167766016, "bytes") == "160 MiB"
    assert human(42252) == "42,252"
    assert human(12345, identifier=True) == "12345"
    assert human(0.123, "share") == "12.3%"
    assert human(-0.031, "change") == "-3.1%"
    assert human(None) == "NULL"
    assert human(dt.datetime(2026, 1, 2, 3, 4, 5, 678)) == "2026-01-02 03:04:05"


def test_units_come_from_the_column_names():
    assert [unit_of(c) for c in ("size_bytes", "bytes", "ts_us", "mean_response_ms", "span_s", "seq_share",
                                 "heat_blocks_s", "rate_per_s", "requests")] == \
        ["bytes", "bytes", "us", "ms", "s", "share", None, None, None]


ROWS = [{"device": "0", "requests": 42252, "bytes": 254613504, "mean_ms": 121.82153315819369, "note": "a|b"},
        {"device": "1", "requests": 2267, "bytes": 8691712, "mean_ms": None, "note": "c"}]
COLUMNS = ["device", "requests", "bytes", "mean_ms", "note"]


def rendered(fmt: str, *tables: list[dict]) -> str:
    stream = io.StringIO()
    out = Output(fmt, stream)
    out.note("a note for people")
    for i, rows in enumerate(tables):
        out.rows(rows, COLUMNS, name=f"t{i}", title=f"table {i}:")
    assert out.render() == 0
    return stream.getvalue()


def test_table_aligns_numbers_with_units_and_counts_rows():
    assert rendered("table", ROWS).splitlines() == [
        "a note for people",
        "table 0:",
        "device  requests     bytes  mean_ms  note",
        "------  --------  --------  -------  ----",
        "0         42,252   243 MiB   122 ms  a|b",
        "1          2,267  8.29 MiB     NULL  c",
        "(2 rows)"]
    assert rendered("table", []).splitlines()[-3:] == [
        "device  requests  bytes  mean_ms  note", "------  --------  -----  -------  ----", "(0 rows)"]


def test_csv_json_and_markdown_hold_the_tables_values():
    table = [line.split("  ") for line in rendered("table", ROWS).splitlines()[4:6]]
    table = [[cell.strip() for cell in row if cell.strip()] for row in table]
    markdown = [[cell.strip() for cell in line.strip("|").split(" | ")]
                for line in rendered("markdown", ROWS).splitlines()[4:6]]
    assert [[c.replace("\\|", "|") for c in row] for row in markdown] == table
    exact = [json.loads(line) for line in rendered("json", ROWS).splitlines()]
    assert exact == ROWS                                    # notes and titles are for people only
    assert list(csv.DictReader(io.StringIO(rendered("csv", ROWS)))) == \
        [{c: "" if r[c] is None else str(r[c]) for c in COLUMNS} for r in ROWS]
    assert [[human(r[c], unit_of(c), identifier=c == "device") for c in COLUMNS] for r in exact] == table


def test_several_tables_are_told_apart_by_machines():
    lines = [json.loads(line) for line in rendered("json", ROWS, ROWS[:1]).splitlines()]
    assert [line["table"] for line in lines] == ["t0", "t0", "t1"]
    sections = rendered("csv", ROWS, ROWS[:1]).split("\n\n")
    assert [len(list(csv.DictReader(io.StringIO(s)))) for s in sections] == [2, 1]
