"""The blockheat command: summary output, catalog, SQL by table name, one-line errors."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from blockheat.jobs.cli.main import main

AGREE = Path(__file__).parents[2] / "data" / "agree"


def test_ingest_prints_per_device_summary(spark, capsys):
    files = [str(AGREE / "msr_fix_0.csv"), str(AGREE / "msr_fix_1.csv")]
    assert main(["ingest", "--format", "msr", "--trace-id", "cli-msr", *files]) == 0
    out = capsys.readouterr().out
    assert "ingested trace cli-msr (msr): 6 records read, 6 requests, 0 rejected" in out
    assert "trace start: 2007-02-22T17:00:00+00:00 (filetime timestamp of the first record)" in out
    lines = [line.split() for line in out.splitlines()]
    assert ["fix_0", "4", "2", "2", "80", "KiB", "0", "s", "2", "s", "2", "s"] in lines
    assert ["fix_1", "2", "1", "1", "4.5", "KiB", "1", "ms", "1.25", "s", "1.25", "s"] in lines
    assert lines[lines.index(["fix_1", "2", "1", "1", "4.5", "KiB", "1", "ms", "1.25", "s", "1.25", "s"]) + 1] == \
        ["(2", "rows)"]
    assert main(["ingest", "--format", "msr", "--trace-id", "cli-msr", "--output-format", "json", *files]) == 0
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == [
        {"device": "fix_0", "records": 4, "reads": 2, "writes": 2, "bytes": 4096 + 8192 + 65536 + 4096,
         "first_us": 0, "last_us": 2_000_000, "span_us": 2_000_000},
        {"device": "fix_1", "records": 2, "reads": 1, "writes": 1, "bytes": 512 + 4096, "first_us": 1000,
         "last_us": 1_250_000, "span_us": 1_249_000}]


def test_sql_json_over_tables_by_name(spark, capsys):
    main(["ingest", "--format", "spc", "--trace-id", "cli-spc", str(AGREE / "spc.csv")])
    capsys.readouterr()
    assert main(["sql", "--json", "SELECT device, count(*) AS n, sum(size_bytes) AS bytes FROM requests "
                 "WHERE trace_id = 'cli-spc' GROUP BY device ORDER BY device"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows == [{"device": "0", "n": 4, "bytes": 4096 + 8192 + 65536 + 4096},
                    {"device": "1", "n": 2, "bytes": 512 + 4096}]


def test_traces_lists_the_catalog(spark, capsys, monkeypatch):
    main(["ingest", "--format", "spc", "--trace-id", "cli-list", str(AGREE / "spc.csv")])
    capsys.readouterr()
    assert main(["traces", "--json"]) == 0
    rows = {r["trace_id"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert rows["cli-list"]["format"] == "spc"
    assert (rows["cli-list"]["requests"], rows["cli-list"]["devices"]) == (6, 2)
    # SPC times are relative to the trace's start, which the format does not record
    assert rows["cli-list"]["start"] == "unknown (relative times)"
    assert rows["cli-list"]["bytes"] == 4096 + 8192 + 65536 + 4096 + 512 + 4096
    # read by delta-rs (no Spark); through Spark when delta-rs cannot read the files as they are: the same rows
    monkeypatch.setattr("blockheat.libs.io.delta_log.read", unreadable)
    assert main(["traces", "--json"]) == 0
    assert {r["trace_id"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())} == rows


def unreadable(*_args, **_kwargs):  # type: ignore[no-untyped-def]
    from blockheat.libs.io.delta_log import LogUnreadable

    raise LogUnreadable("forced")


@pytest.mark.parametrize(("argv", "code", "message"), [
    (["ingest", "--format", "msr", "--trace-id", "x", "/no/such/file.csv"], 1,
     "blockheat: error: /no/such/file.csv: no such file\n"),
    (["ingest", "--format", "msr", "--trace-id", "bad id!", str(AGREE / "spc.csv")], 1,
     "blockheat: error: invalid trace id 'bad id!': use 1-128 letters, digits and _ . : - "
     "(starting with a letter or digit)\n"),
    (["ingest", "--format", "spc", "--trace-id", "hplajw\n", str(AGREE / "spc.csv")], 1,
     "blockheat: error: invalid trace id 'hplajw\\n': use 1-128 letters, digits and _ . : - "
     "(starting with a letter or digit)\n"),
    (["sql", "SELECT * FROM no_such_table"], 1, None),
    (["ingest", "--format", "csv", "--trace-id", "x", "--csv-columns", "ts=0,when=1", "f.csv"], 2,
     "blockheat: error: --csv-columns item 'when=1': expected FIELD=INDEX with FIELD one of "
     "ts, device, op, offset, size, response, queue and INDEX a 0-based column number\n"),
    (["plan", "check", "no-such-plan"], 1, None),
])
def test_errors_are_one_line_with_nonzero_exit(spark, capsys, argv, code, message):
    assert main(argv) == code
    err = capsys.readouterr().err
    error_lines = [line for line in err.splitlines() if line.startswith("blockheat: error:")]
    assert len(error_lines) == 1
    assert "Traceback" not in err
    assert "\tat " not in err
    if message is not None:
        assert error_lines[0] + "\n" == message
    elif argv[0] == "plan":
        assert error_lines[0].startswith("blockheat: error: no plan 'no-such-plan' in reorg_plans under ")
    else:
        assert "TABLE_OR_VIEW_NOT_FOUND" in error_lines[0]
        assert "no_such_table" in error_lines[0]
        assert error_lines[0].endswith("SQLSTATE: 42P01; line 1 pos 14")      # whole, without the query plan


def test_custom_csv_layout_from_command_line(spark, capsys):
    argv = ["ingest", "--format", "csv", "--trace-id", "cli-csv", "--csv-columns",
            "ts=0,device=1,op=2,offset=3,size=4,response=5", "--csv-delimiter", ";",
            "--csv-ts-unit", "s", "--csv-offset-unit", "sectors", "--csv-response-unit", "ms",
            "--csv-read-ops", "read", "--csv-write-ops", "write", "--csv-skip-header", "1",
            str(AGREE / "custom.csv")]
    assert main(argv) == 0
    assert "7 records read, 6 requests, 1 rejected" in capsys.readouterr().out


def test_connect_server_requires_the_warehouses_token(tmp_path, monkeypatch, capsys):
    """`connect-server` hands its server the token of the warehouse (a file only its owner may read) and tells
    clients how to give it; Spark Connect then refuses a client without it (tests/jobs/cli/test_serve.py)."""
    import stat

    from blockheat.jobs.cli import console
    from blockheat.libs.io import sql_access

    started = {}
    monkeypatch.setenv("BLOCKHEAT_WAREHOUSE", str(tmp_path / "wh"))
    monkeypatch.setattr("blockheat.libs.io.connect_server.server_command",
                        lambda cfg, host, port: ["spark-connect", host])
    monkeypatch.setattr(console, "run_child",
                        lambda cmd, env, quiet, server: started.update(cmd=cmd, env=env, server=server) or 0)
    assert main(["connect-server", "--port", "15999"]) == 0
    token_file = tmp_path / "wh" / "_serve" / sql_access.TOKEN_FILE
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert started["env"][sql_access.TOKEN_ENV] == token_file.read_text().strip()
    assert sql_access.TOKEN_ENV not in " ".join(started["cmd"])         # never on the command line
    assert started["server"]                                            # Ctrl-C stops it, even in the background
    assert (f'clients set BLOCKHEAT_SPARK_REMOTE="sc://localhost:15999/;token=$(cat {token_file})"'
            in capsys.readouterr().err)


def test_profile_asks_for_a_lean_local_driver(monkeypatch):
    """`blockheat profile` runs its passes in Python workers reading the files: its session is built with
    lean_local (a local driver's JVM on a small heap, SparkConfig.from_env)."""
    import argparse

    import blockheat.jobs.cli.heat as heat

    class Built(Exception):
        pass

    asked = {}

    def spark_session(args, app, **options):
        asked.update(options, app=app)
        raise Built

    monkeypatch.setattr(heat, "spark_session", spark_session)
    with pytest.raises(Built):
        heat.cmd_profile(argparse.Namespace(trace_id="t1", window=3600.0, full=False, output="table"))
    assert asked == {"app": "profile t1", "trace_id": "t1", "lean_local": True}
