"""What the blockheat command prints, from real commands: the same rows in table, CSV, JSON and Markdown form,
a row count under every table, exit codes, --version, every subcommand's help, the files an experiment wrote,
and one real `blockheat`
process whose stderr holds no JVM, log4j or Hadoop banner, no stage bar and no traceback."""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from blockheat.jobs.cli.main import build_parser, main
from blockheat.jobs.cli.output import human, unit_of
from blockheat.libs.io.jvm import SHORT_JOB_OPTIONS
from blockheat.libs.io.session import SparkConfig, session_conf

AGREE = Path(__file__).parents[2] / "data" / "agree"
BLOCKHEAT = Path(sys.executable).parent / "blockheat"
TRACE = "cli-out"
# spc.csv: 6 requests on 2 devices, 4 reads, 86,528 bytes (tests/data/agree)
TRACE_ROW = {"trace_id": TRACE, "format": "spc", "devices": 2, "requests": 6, "rejected": 0,
             "bytes": 4096 + 8192 + 65536 + 4096 + 512 + 4096, "start": "unknown (relative times)"}
BANNERS = re.compile(r"incubator modules|log4j|Setting default log level|setLogLevel|NativeCodeLoader|WARN |"
                     r"Ivy Default Cache|:: resolving|\[Stage \d|Traceback|Py4J|py4j|\tat ")


@pytest.fixture(scope="module")
def traced(spark):
    assert main(["ingest", "--format", "spc", "--trace-id", TRACE, str(AGREE / "spc.csv")]) == 0
    return TRACE


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def table_cells(text: str) -> tuple[list[str], list[list[str]], str]:
    """Header, cells and footer of a plain table (columns told apart by the header's rule)."""
    lines = text.rstrip("\n").splitlines()
    rule = next(i for i, line in enumerate(lines) if re.fullmatch(r"[- ]+", line))
    spans = [m.span() for m in re.finditer(r"-+", lines[rule])]

    def cut(line: str) -> list[str]:
        return [line[a:b].strip() for a, b in spans]

    footer = next(i for i in range(rule + 1, len(lines)) if lines[i].startswith("("))
    return cut(lines[rule - 1]), [cut(line) for line in lines[rule + 1:footer]], lines[footer]


def test_every_format_holds_the_same_rows(traced, capsys):
    code, table, _ = run(capsys, "traces")
    assert code == 0
    header, cells, footer = table_cells(table)
    assert footer == f"({len(cells)} row{'s' if len(cells) != 1 else ''})"
    exact = [json.loads(line) for line in run(capsys, "traces", "--format", "json")[1].splitlines()]
    mine = next(r for r in exact if r["trace_id"] == TRACE)
    assert {k: mine[k] for k in TRACE_ROW} == TRACE_ROW
    assert list(mine) == header
    # the table shows each exact value with its unit (84.5 KiB, 6.98 days, thousands separators), and times to
    # the second with their zone (JSON: ISO-8601 with the offset)
    assert all(r["ingested_at"].endswith("+00:00") for r in exact)
    shown = [[r[c][:19].replace("T", " ") + " UTC" if c == "ingested_at" else human(r[c], unit_of(c))
              for c in header]
             for r in exact]
    assert shown == cells
    row = cells[[r["trace_id"] for r in exact].index(TRACE)]
    assert row[header.index("bytes")] == "84.5 KiB"
    parsed = list(csv.DictReader(io.StringIO(run(capsys, "traces", "--format", "csv")[1])))
    assert parsed == [{k: "" if v is None else str(v) for k, v in r.items()} for r in exact]
    markdown = run(capsys, "traces", "--format", "markdown")[1].splitlines()
    assert markdown[0] == "| " + " | ".join(header) + " |"
    assert [[c.strip() for c in line.strip("|").split(" | ")] for line in markdown[2:]] == cells


def test_empty_results_and_limits_are_counted(traced, capsys):
    code, out, _ = run(capsys, "sql", f"SELECT device, size_bytes FROM requests WHERE trace_id = '{TRACE}' AND false")
    assert (code, out) == (0, "device  size_bytes\n------  ----------\n(0 rows)\n")
    code, out, _ = run(capsys, "sql", "--limit", "2",
                       f"SELECT device, size_bytes FROM requests WHERE trace_id = '{TRACE}' ORDER BY seq")
    header, cells, footer = table_cells(out)
    assert (code, header, len(cells), footer) == (0, ["device", "size_bytes"], 2, "(2 rows; the first 2; --limit 0 "
                                                                                    "for all)")


def test_a_spark_error_is_printed_whole(traced, capsys):
    code, out, err = run(capsys, "sql", "SELECT count(*) FROM requests TIMESTAMP AS OF '2000-01-01'")
    assert (code, out) == (1, "")
    (line,) = [line for line in err.splitlines() if line.startswith("blockheat: error:")]
    assert line.startswith("blockheat: error: [DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION] The provided "
                           "timestamp (2000-01-01 00:00:00.0) is before the earliest version available")
    assert re.search(r"Please use a timestamp after \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.$", line)
    assert "SQLQueryContextLogger" not in err
    assert "Traceback" not in err


def test_exit_codes_version_and_bad_options(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert (done.value.code, capsys.readouterr().out) == (0, f"blockheat {version('blockheat')}\n")
    with pytest.raises(SystemExit) as done:
        main(["traces", "--format", "yaml"])
    assert done.value.code == 2
    assert "invalid choice: 'yaml'" in capsys.readouterr().err
    assert main(["sql", "--limit", "-1", "SELECT 1"]) == 2


def subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command's parser by its command line, `sim validate` included."""
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[f"{prefix}{name}"] = sub
                found.update(subcommands(sub, f"{prefix}{name} "))
    return found


def test_every_subcommand_has_an_example_defaults_and_help_for_each_option():
    commands = subcommands(build_parser())
    assert {"ingest", "traces", "sql", "heat", "age", "score", "plan", "simulate", "sim validate", "beeline",
            "experiment"} <= set(commands)
    for name, parser in commands.items():
        text = parser.format_help()                     # adds a job's deferred options too
        assert re.search(r"^examples?:\n  blockheat ", text, re.MULTILINE), name
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            assert action.help, f"{name} {action.dest}: no help text"
            shown = action.default not in (None, False, "") and action.option_strings
            assert not shown or "default" in parser._get_formatter()._expand_help(action), f"{name} {action.dest}"


def test_an_experiment_names_the_files_it_wrote(tmp_path, capsys):
    """The last line lists every file written, relative to the directory, where it is (tables under tables/)."""
    assert main(["experiment", "placement", "--scale", "tiny", "--out", str(tmp_path / "ex")]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == (f"written: {tmp_path / 'ex'}/ (tables/placements.parquet, tables/sensitivity.parquet, "
                    "tables/array_size.parquet, tables/read_write_balance.parquet, queue_lengths.png, summary.md)")
    assert sorted(str(f.relative_to(tmp_path / "ex")) for f in (tmp_path / "ex").rglob("*") if f.is_file()) == [
        "queue_lengths.png", "summary.md", "tables/array_size.parquet", "tables/placements.parquet",
        "tables/read_write_balance.parquet", "tables/sensitivity.parquet"]


def test_sessions_draw_no_stage_bars():
    assert session_conf(SparkConfig(master="local[2]"))["spark.ui.showConsoleProgress"] == "false"


def test_a_real_blockheat_process_prints_rows_and_nothing_else(traced, spark, spark_cfg, tmp_path):
    """One `blockheat traces` of its own (its own JVM) on a copy of the session's ingested tables."""
    warehouse = tmp_path / "wh"
    for table in ("requests", "rejected_records", "traces"):
        shutil.copytree(spark_cfg.warehouse / table, warehouse / table)
    env = {**os.environ, "BLOCKHEAT_WAREHOUSE": str(warehouse), "BLOCKHEAT_SPARK_MASTER": "local[1]",
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "BLOCKHEAT_JAVA_OPTIONS": " ".join(SHORT_JOB_OPTIONS)}
    for name in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET", "SPARK_TESTING", "BLOCKHEAT_SPARK_REMOTE"):
        env.pop(name, None)
    done = subprocess.run([str(BLOCKHEAT), "traces"], env=env, capture_output=True, text=True, timeout=300,
                          check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [line for line in done.stderr.splitlines() if not line.startswith("blockheat: ")] == []
    assert not BANNERS.search(done.stderr), done.stderr
    header, cells, footer = table_cells(done.stdout)
    row = dict(zip(header, cells[[c[0] for c in cells].index(TRACE)], strict=True))
    assert {k: row[k] for k in ("format", "devices", "requests", "bytes", "start")} == \
        {"format": "spc", "devices": "2", "requests": "6", "bytes": "84.5 KiB", "start": "unknown (relative times)"}
    assert footer == f"({len(cells)} row{'s' if len(cells) != 1 else ''})"


def test_experiment_all_writes_a_folder_per_experiment_and_every_claim(tmp_path, capsys, monkeypatch):
    """`experiment all --out DIR`: DIR/NAME/ per experiment and DIR/summary.md with every claim and the counts
    (the two quickest experiments stand for all of them)."""
    import blockheat.libs.experiments as experiments

    monkeypatch.setattr(experiments, "EXPERIMENTS", {k: experiments.EXPERIMENTS[k] for k in ("placement", "ssa-bsu")})
    assert main(["experiment", "all", "--scale", "tiny", "--out", str(tmp_path / "all")]) == 0
    printed = capsys.readouterr().out
    assert {p.name for p in (tmp_path / "all").iterdir()} == {"placement", "ssa-bsu", "summary.md"}
    assert (tmp_path / "all" / "placement" / "tables" / "placements.parquet").is_file()
    assert (tmp_path / "all" / "ssa-bsu" / "summary.md").is_file()
    summary = (tmp_path / "all" / "summary.md").read_text()
    rows = [line for line in summary.splitlines() if line.startswith(("| placement |", "| ssa-bsu |"))]
    counted = re.search(r"^(\d+) paper claims: (\d+) hold, (\d+) do not hold, (\d+) not comparable", summary, re.M)
    assert counted
    assert int(counted[1]) == len(rows) == int(counted[2]) + int(counted[3]) + int(counted[4]) >= 5
    assert f"every claim: {tmp_path / 'all' / 'summary.md'} (" in printed
