"""Reruns replace a trace atomically, leave other traces alone, and reproduce the same values."""
from __future__ import annotations

import threading
from pathlib import Path

from delta.tables import DeltaTable

from blockheat.libs.io.table_versions import table_version
from tests.builders import ingest, requests_of, table_count, trace_row

AGREE = Path(__file__).parents[1] / "data" / "agree"


def _values(rows: list[dict]) -> list[tuple]:
    return [tuple(v for k, v in sorted(r.items())) for r in rows]


def test_rerun_replaces_atomically_with_identical_values(spark, spark_cfg):
    requests_path = str(spark_cfg.warehouse / "requests")
    first_seen = table_version(spark_cfg.warehouse, "requests")       # None: the table is made below
    ingest(spark, spark_cfg, "spc", "rerun-a", [AGREE / "spc.csv"])
    ingest(spark, spark_cfg, "alibaba", "rerun-b", [AGREE / "alibaba.csv"])
    first_a = requests_of(spark, "rerun-a")
    b_before = requests_of(spark, "rerun-b")
    version_before = DeltaTable.forPath(spark, requests_path).history(1).first().version

    ingest(spark, spark_cfg, "spc", "rerun-a", [AGREE / "spc.csv"])

    assert _values(requests_of(spark, "rerun-a")) == _values(first_a)      # same values, no duplicates
    assert requests_of(spark, "rerun-b") == b_before                       # other trace untouched
    history = DeltaTable.forPath(spark, requests_path).history().where(f"version > {version_before}").collect()
    assert [h.operation for h in history] == ["WRITE"], "one commit replaces the trace"
    # Every version a concurrent reader could have seen, from the one before rerun-a's first ingest to the
    # rerun's own, holds either 0 or all 6 rows of rerun-a.
    last = DeltaTable.forPath(spark, requests_path).history(1).first().version
    assert last == version_before + 1
    for version in range(0 if first_seen is None else first_seen, last + 1):
        n = (spark.read.format("delta").option("versionAsOf", version).load(requests_path)
             .where("trace_id = 'rerun-a'").count())
        assert n in (0, 6), (version, n)
    assert trace_row(spark, "rerun-a")["records_accepted"] == 6
    assert table_count(spark, "traces", "rerun-a") == 1


def test_rerun_with_fewer_records_drops_the_old_rows(spark, spark_cfg, tmp_path):
    full = AGREE / "spc.csv"
    ingest(spark, spark_cfg, "spc", "shrink", [full])
    half = tmp_path / "half.csv"
    half.write_text("".join(full.read_text().splitlines(keepends=True)[:3]))
    ingest(spark, spark_cfg, "spc", "shrink", [half])
    rows = requests_of(spark, "shrink")
    assert [r["seq"] for r in rows] == [0, 1, 2]
    assert {r["source_file"] for r in rows} == {str(half)}


def test_concurrent_ingests_of_different_traces_both_commit(spark, spark_cfg):
    errors: list[BaseException] = []

    def work(fmt: str, trace: str, name: str) -> None:
        try:
            ingest(spark, spark_cfg, fmt, trace, [AGREE / name])
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=("spc", "conc-1", "spc.csv")),
               threading.Thread(target=work, args=("tencent", "conc-2", "tencent.csv"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert table_count(spark, "requests", "conc-1") == 6
    assert table_count(spark, "requests", "conc-2") == 6
    assert {r["device"] for r in requests_of(spark, "conc-2")} == {"1001", "1002"}


def test_a_heat_run_commits_its_windows_then_the_whole_trace(spark, spark_cfg):
    # docs/sql.md's time travel: one `heat` run commits extent_heat twice, the windows' rows and then the whole
    # trace's, so the first of its versions holds half the run and the second all of it.
    from blockheat.jobs.extent_heat import HeatConfig, run

    ingest(spark, spark_cfg, "spc", "heat-commits", [AGREE / "spc.csv"])
    before = table_version(spark_cfg.warehouse, "extent_heat")
    run(spark, spark_cfg, HeatConfig("heat-commits", extent_bytes=65_536, window_us=60_000_000), full=True)
    after = table_version(spark_cfg.warehouse, "extent_heat")
    assert after == (0 if before is None else before) + 2          # a new table's version 0: its creation, empty

    def windows(version: int) -> set[int]:
        return {r.window_us for r in spark.read.format("delta").option("versionAsOf", version)
                .load(str(spark_cfg.warehouse / "extent_heat")).where("trace_id = 'heat-commits'")
                .select("window_us").distinct().collect()}

    assert windows(after - 1) == {60_000_000}
    assert windows(after) == {60_000_000, 0}
