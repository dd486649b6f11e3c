"""Mistakes on the command line are refused in one line before any Spark JVM: a mistyped command, option or choice
gets "did you mean", a bad option value the usage of that option only (argparse prints the whole usage); an
unknown trace id (with the closest ingested ones), a missing input file, an `--out` that cannot be written, an
`--append` to no trace, and a score's or plan's malformed window, unknown spec or policy family are refused by
processes that cannot start Java at all."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from blockheat.jobs.cli.main import main
from tests.conftest import HPLAJW_TRACE_ID
from tests.libs.readers.test_agree import AGREE

FORMATS = ("'alibaba', 'blkparse', 'csv', 'disksim-ascii', 'disksim-validate', 'hp-srt', 'msr', 'spc', 'tencent', "
           "'vscsi'")


@pytest.mark.parametrize(("argv", "err"), [
    (["hea", "x"], "blockheat: error: unknown command 'hea'; did you mean 'heat'? (blockheat --help lists the "
                   "commands)\n"),
    (["heat", "--windw", "60", "x"],
     "blockheat heat: error: unrecognized arguments: --windw (did you mean --window?)\n"),
    (["ingest", "--formt", "msr", "--trace-id", "x", "f.csv"],
     "blockheat ingest: error: unrecognized arguments: --formt (did you mean --format or --output-format?)\n"),
    (["ingest", "--format", "msc", "--trace-id", "x", "f.csv"],
     f"usage: blockheat ingest --format FMT\nblockheat ingest: error: argument --format: invalid choice: 'msc'; did "
     f"you mean 'spc' or 'msr'? (choose from {FORMATS})\n"),
    (["heat", "--window", "an hour", "x"],
     "usage: blockheat heat [--window WINDOW]\nblockheat heat: error: argument --window: invalid float value: "
     "'an hour'\n"),
    (["traces", "--format", "yaml"],
     "usage: blockheat traces [--format {table,csv,json,markdown}]\nblockheat traces: error: argument "
     "--format/--output-format: invalid choice: 'yaml' (choose from 'table', 'csv', 'json', 'markdown')\n"),
])
def test_a_parse_error_is_one_line_with_a_suggestion_or_the_options_usage(capsys, argv, err):
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert (done.value.code, capsys.readouterr().err) == (2, err)


def test_a_mistyped_plan_verb_is_suggested(capsys):
    assert main(["plan", "chek", "0123abcd"]) == 2
    assert capsys.readouterr().err == ("blockheat: error: plan chek 0123abcd: expected TRACE_ID, check PLAN_ID, export "
                                       "PLAN_ID or schema; did you mean plan check 0123abcd?\n")


def without_java(warehouse: Path) -> dict[str, str]:
    """An environment on `warehouse` in which no JVM can start (no java, no JAVA_HOME, no SPARK_HOME)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BLOCKHEAT_", "AIRFLOW"))}
    env.update(BLOCKHEAT_WAREHOUSE=str(warehouse), JAVA_HOME="/nonexistent", SPARK_HOME="/nonexistent",
               PATH=str(Path(sys.executable).parent) + ":/nonexistent", BLOCKHEAT_SPARK_REMOTE="local")
    return env


def test_bad_names_and_paths_are_refused_before_spark(hplajw, spark_cfg, tmp_path):
    env = without_java(spark_cfg.warehouse)

    def blockheat(*argv: str) -> tuple[int, list[str]]:
        done = subprocess.run([sys.executable, "-m", "blockheat.jobs.cli.main", *argv], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120, check=False)
        return done.returncode, done.stderr.splitlines()

    code, err = blockheat("heat", "hplajw-tset")
    assert (code, len(err)) == (1, 1), err
    assert err[0].startswith(f"blockheat: error: no trace 'hplajw-tset' in {spark_cfg.warehouse} (ingested: ")
    # the closest ingested id first (the session's warehouse may hold other traces by then, hplajw-slice say)
    assert re.search(f"; did you mean '{HPLAJW_TRACE_ID}'( or '[^']+')*\\?$", err[0]), err
    code, err = blockheat("profile", "zzzz")
    assert (code, len(err), err[0].endswith(")")) == (1, 1, True), err       # nothing close: the list only
    assert blockheat("ingest", "--format", "msr", "--trace-id", "x", str(tmp_path / "no.csv")) == (
        1, [f"blockheat: error: {tmp_path / 'no.csv'}: no such file"])
    code, err = blockheat("ingest", "--append", "--format", "spc", "--trace-id", "no-such", str(AGREE / "spc.csv"))
    assert (code, len(err), err[0].startswith("blockheat: error: no trace 'no-such' in ")) == (1, 1, True), err
    assert blockheat("report", HPLAJW_TRACE_ID, "--out", "/proc/forbidden/report") == (
        2, ["blockheat: error: --out /proc/forbidden/report: cannot write there (No such file or directory)"])
    assert blockheat("score", HPLAJW_TRACE_ID, "--window", "86400:3600") == (
        2, ["blockheat: error: window '86400:3600': the end must be after the start"])
    assert blockheat("plan", HPLAJW_TRACE_ID, "--policy", "best", "--window", "1h") == (
        2, ["blockheat: error: window '1h': use 'all' or START:END in seconds from the trace start (e.g. 0:21600, or "
            "86400: for the rest of the trace)"])
    code, err = blockheat("score", HPLAJW_TRACE_ID, "--spec", "hp_c2247")
    assert (code, err) == (2, ["blockheat: error: --spec 'hp_c2247': spec 'hp_c2247' is neither a shipped spec "
                               "(hp_c2247a, hp_335h, five_table1, ibm_ultrastar_73lzx, maxtor_atlas_10k3, ssa_table1) "
                               "nor a file"]), err
    code, err = blockheat("score", HPLAJW_TRACE_ID, "--families", "greedy,colling")
    assert (code, len(err), err[0].startswith("blockheat: error: policy family 'colling' is not available")) == (
        2, 1, True), err
    assert list(tmp_path.iterdir()) == []
