"""`blockheat graph` and `blockheat alis` end to end on a hand-built trace (values worked out by
hand below), the incremental graph build, and argument errors."""
from __future__ import annotations

import contextlib
import io
import os

import pytest

from blockheat.jobs.cli.main import main
from blockheat.libs.io.tables import read_table, replace_trace
from blockheat.schemas import requests as R

TRACE = "alis-hand"
KIB4 = 4096
# Units by home address: A 0, B 5, C 9, D 20, X 39 (in 4 KiB blocks) -> unit ids 0..4.
BLOCK = {"A": 0, "B": 5, "C": 9, "D": 20, "X": 39}
INTERVALS = ("A B C A B C", "A B C D", "A B C")   # reads of intervals 0, 1, 2 (1000 s each)


def hand_trace(spark, spark_cfg):
    rows, seq = [], 0
    for interval_id, text in enumerate(INTERVALS):
        for k, unit in enumerate(text.split()):
            rows.append((TRACE, "d0", seq, interval_id * 1_000_000_000 + k * 1_000_000, "R",
                         BLOCK[unit] * KIB4, KIB4, None, None, "hand"))
            seq += 1
    rows.append((TRACE, "d0", seq, 500_000_000, "W", BLOCK["X"] * KIB4, KIB4, None, None, "hand"))
    replace_trace(spark.createDataFrame(rows, R.SPARK_SCHEMA), spark, spark_cfg.warehouse, "requests", TRACE)


def run_cli(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    return code, out.getvalue()


@pytest.fixture(scope="module")
def built(spark, spark_cfg):
    """The two commands run once for the module: (graph exit code, output, alis exit code, output)."""
    hand_trace(spark, spark_cfg)
    return (*run_cli(["graph", TRACE, "--tau", "2", "--interval", "1000"]), *run_cli(["alis", TRACE]))


def table(spark, spark_cfg, name):
    return read_table(spark, spark_cfg.warehouse, name, TRACE)


def test_graph_command_writes_units_graphs_and_runs(spark, spark_cfg, built):
    graph_code, out, _, _ = built
    assert graph_code == 0
    assert not (spark_cfg.warehouse / "_scratch").exists()       # the edge counts' scratch Parquet is gone
    units = {r.unit_id: (r.offset_bytes // KIB4, r.size_bytes)
             for r in table(spark, spark_cfg, "reorg_units").collect()}
    assert units == {0: (0, KIB4), 1: (5, KIB4), 2: (9, KIB4), 3: (20, KIB4), 4: (39, KIB4)}
    graph = {(r.interval_id, r.src_unit, r.dst_unit): r.weight
             for r in table(spark, spark_cfg, "access_graph").collect()}
    # Interval 0, A B C A B C with tau 2, f 1 (j=1 weighs 1, j=2 weighs 1/2), aged once: 0.8 x raw.
    assert {k[1:]: w for k, w in graph.items() if k[0] == 0} == pytest.approx(
        {(0, 1): 1.6, (1, 2): 1.6, (0, 2): 0.8, (2, 0): 0.8, (1, 0): 0.4, (2, 1): 0.4})
    # Interval 1 adds A B C D: 0.8 x raw + 0.2 x interval 0.
    assert {k[1:]: w for k, w in graph.items() if k[0] == 1} == pytest.approx(
        {(0, 1): 1.12, (1, 2): 1.12, (2, 3): 0.8, (0, 2): 0.56, (1, 3): 0.4, (2, 0): 0.16, (1, 0): 0.08,
         (2, 1): 0.08})
    runs = sorted((r.interval_id, r.run_id, r.rank, r.position, r.unit_id)
                  for r in table(spark, spark_cfg, "alis_runs").collect())
    assert [(i, u) for i, _, _, _, u in runs if i == 0] == [(0, 0), (0, 1), (0, 2)]   # run A B C
    lines = [line.split() for line in out.splitlines()]
    # device, units, refs (reads), edges of interval 2, graph bytes, budget, runs, run units, runs in all
    assert lines[lines.index(["device", "units", "refs", "edges", "graph_bytes", "budget_bytes", "runs", "run_units",
                              "runs_all"]) + 2][:4] == ["d0", "5", "13", "8"]


def test_alis_command_plans_and_scores_the_area(spark, spark_cfg, built):
    _, _, alis_code, out = built
    assert alis_code == 0
    plan0 = sorted((r.ra_offset_bytes // KIB4, r.region, r.run_id, r.unit_id, r.home_offset_bytes // KIB4,
                    r.ra_address_bytes) for r in table(spark, spark_cfg, "alis_layout").collect()
                   if r.interval_id == 0)
    # Storage used 40 blocks: area 6 blocks at byte 49,152. Run A B C first, then the three hottest
    # units (A, B, C with two references each; X was written once) in address order, as copies.
    assert plan0 == [(0, "run", 0, 0, 0, 49_152), (1, "run", 0, 1, 5, 53_248), (2, "run", 0, 2, 9, 57_344),
                     (3, "heat", None, 0, 0, 61_440), (4, "heat", None, 1, 5, 65_536), (5, "heat", None, 2, 9, 69_632)]
    summary = {r.interval_id: (r.next_reads, r.realizable_reads, r.lookahead_reads, r.runs_placed, r.bytes_placed)
               for r in table(spark, spark_cfg, "alis_summary").collect()}
    # Plan 0 serves A B C of interval 1 (not D); interval 1's own plan has run A B C D: 4 of 4.
    assert summary[0] == (4, 3, 4, 1, 6 * KIB4)
    assert summary[1][:3] == (3, 3, 3)
    assert summary[2][:3] == (None, None, None)
    row = next(line.split() for line in out.splitlines() if line.startswith("d0 "))
    assert row[-2:] == ["85.7%", "100.0%"]       # (3 + 3) / 7 and 7 / 7


def test_incremental_graph_from_an_interval_equals_the_full_build(spark, spark_cfg, built):
    from blockheat.jobs.alis_graph import GraphOptions, run

    def snapshot():
        return (sorted(tuple(r) for r in table(spark, spark_cfg, "access_graph").collect()),
                sorted(tuple(r) for r in table(spark, spark_cfg, "alis_runs").collect()))

    full = snapshot()
    summary = run(spark, spark_cfg, GraphOptions(TRACE, tau=2, interval_us=1_000_000_000, from_interval=2,
                                                 threshold=0.1))
    assert summary.intervals == [2]
    assert snapshot()[0] == full[0]


def test_incremental_build_refuses_other_parameters(spark, spark_cfg, built):
    from blockheat.jobs.alis_graph import GraphOptions, GraphParamsError, run

    with pytest.raises(GraphParamsError, match="built with other beta, min_run_length, tau"):
        run(spark, spark_cfg, GraphOptions(TRACE, tau=3, beta=0.1, interval_us=1_000_000_000, from_interval=1))


@pytest.mark.parametrize(("argv", "message"), [
    (["graph", "x", "--tau", "0"], "tau must be >= 1, got 0"),
    (["graph", "x", "--interval", "0"], "--interval must be > 0 seconds, got 0"),
    (["alis", "x", "--ra-share", "1.5"], "ra_share must be in (0, 1], got 1.5"),
])
def test_argument_errors_are_one_line(spark, capsys, argv, message):
    assert main(argv) in (1, 2)
    assert capsys.readouterr().err.strip() == f"blockheat: error: {message}"


def test_a_trace_that_is_neither_ingested_nor_written_is_refused_first(spark, capsys):
    assert main(["alis", "no-such-trace"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("blockheat: error: no trace 'no-such-trace'")
    assert os.environ["BLOCKHEAT_WAREHOUSE"] in line


def test_stored_runs_read_from_the_graph_files_equal_find_runs(spark, spark_cfg, built, monkeypatch):
    """alis_layout's runs of the stored graphs: one task per device reading its files, the same rows as
    find_runs over the table (and find_runs itself when the files cannot be read directly)."""
    import blockheat.libs.table_io.alis_runs as stored
    from blockheat.libs.alis.runs import find_runs
    from blockheat.libs.table_io.alis_runs import find_stored_runs
    from blockheat.libs.table_io.device_pass import Unsupported
    from blockheat.sim.alis.runs import THRESHOLD_COMBINED

    def rows(df):
        return sorted(tuple(r) for r in df.select("device", "interval_id", "run_id", "rank", "position",
                                                 "unit_id").collect())

    want = rows(find_runs(table(spark, spark_cfg, "access_graph"), tau=2, threshold=THRESHOLD_COMBINED))
    assert {r[1] for r in want} == {0, 1, 2}
    assert rows(find_stored_runs(spark, spark_cfg.warehouse, TRACE, tau=2, threshold=THRESHOLD_COMBINED)) == want

    def unreadable(*args, **kwargs):
        raise Unsupported("test: a deletion vector")

    monkeypatch.setattr(stored, "trace_files", unreadable)
    assert rows(find_stored_runs(spark, spark_cfg.warehouse, TRACE, tau=2, threshold=THRESHOLD_COMBINED)) == want


def test_graph_command_without_runs_leaves_alis_runs_and_says_so(spark, spark_cfg, built):
    runs = sorted(tuple(r) for r in table(spark, spark_cfg, "alis_runs").collect())
    code, out = run_cli(["graph", TRACE, "--tau", "2", "--interval", "1000", "--no-runs"])
    assert code == 0
    assert sorted(tuple(r) for r in table(spark, spark_cfg, "alis_runs").collect()) == runs
    lines = [line.split() for line in out.splitlines()]
    assert lines[lines.index(["device", "units", "refs", "edges", "graph_bytes", "budget_bytes"]) + 2][:4] == \
           ["d0", "5", "13", "8"]
    assert "no runs found (--no-runs)" in out
    assert "tables: reorg_units, access_graph, alis_graphs; next: blockheat alis" in out
