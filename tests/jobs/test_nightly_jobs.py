"""Nightly mode of the chained jobs on the first two days of the real hplajw trace, both days' files ingested
before day 0 runs (a backfill): aged_heat and alis_graph --interval-index N compute exactly day N from day
N-1's stored rows and the requests up to the end of day N. The tables are pinned by digest; the DAG test
(tests/dags/test_nightly_dag.py) pins the same digests for the nightly chain, where each night saw only the
files landed by then, so a backfill gives the same tables as the nightly runs."""
from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from blockheat.jobs import aged_heat, alis_graph
from blockheat.libs import nightly
from blockheat.libs.io.table_versions import table_version
from blockheat.libs.io.tables import read_table, table_path, trace_rows
from tests.builders import ingest, table_digest, write_srt_days

TRACE = "nl-backfill"
ALPHA = 0.8
# table_digest (tests/builders.py) of each chained table of the first two hplajw days (trace_id left out), days 0
# and 1 built (pinned from Spark's collect(); the files give the same)
CHAIN_DIGESTS = {"aged_heat": "be7fb0e7511cabcc", "reorg_units": "fc6f9fbf5835ad48",
                 "access_graph": "93a0b92092b4059d", "alis_runs": "2c1e6c305046bea8", "alis_graphs": "fc2a599bb299d912"}


def chain_digests(spark, warehouse, trace_id):
    return {t: table_digest(spark, warehouse, t, trace_id) for t in CHAIN_DIGESTS}


@pytest.fixture(scope="module")
def chain(spark, spark_cfg, repo_root, tmp_path_factory):
    """Days 0 and 1 built; the aged_heat version before day 1's commit."""
    source = repo_root / "data/traces/hplajw/ajw.1week.srt"
    folder = tmp_path_factory.mktemp("landing")
    days = [write_srt_days(folder / f"day-{d}.srt", source, range(d, d + 1)) for d in (0, 1)]
    ingest(spark, spark_cfg, "hp-srt", TRACE, days)
    aged_heat.run(spark, spark_cfg, aged_heat.AgingConfig(TRACE, interval_index=0))
    alis_graph.run(spark, spark_cfg, alis_graph.GraphOptions(TRACE, interval_index=0))
    before = table_version(spark_cfg.warehouse, "aged_heat")
    aged_heat.run(spark, spark_cfg, aged_heat.AgingConfig(TRACE, interval_index=1))
    alis_graph.run(spark, spark_cfg, alis_graph.GraphOptions(TRACE, interval_index=1))
    return before


def test_chain_tables_are_pinned(spark, spark_cfg, chain):
    assert chain_digests(spark, spark_cfg.warehouse, TRACE) == CHAIN_DIGESTS
    graphs = read_table(spark, spark_cfg.warehouse, "access_graph", TRACE)
    assert {r[0]: r[1] for r in graphs.groupBy("interval_id").count().collect()} == {0: 8, 1: 120}
    assert read_table(spark, spark_cfg.warehouse, "alis_graphs", TRACE).first()["intervals"] == 2


def test_units_are_numbered_by_first_use(spark, spark_cfg, chain):
    """Day 0's units keep ids 0..n0-1 per device; day 1's new ones follow; one unit per request extent."""
    keys = ["device", "offset_bytes", "size_bytes"]
    units = {(r["device"], r["offset_bytes"], r["size_bytes"]): r["unit_id"]
             for r in read_table(spark, spark_cfg.warehouse, "reorg_units", TRACE).collect()}
    requests = read_table(spark, spark_cfg.warehouse, "requests", TRACE)
    first_day = {tuple(r) for r in requests.where(F.col("ts_us") < 86_400_000_000).select(*keys).distinct().collect()}
    assert set(units) == {tuple(r) for r in requests.select(*keys).distinct().collect()}
    for device in {d for d, _, _ in units}:
        ids = {k: v for k, v in units.items() if k[0] == device}
        n0 = sum(1 for k in first_day if k[0] == device)
        assert sorted(ids.values()) == list(range(len(ids)))
        assert sorted(v for k, v in ids.items() if k in first_day) == list(range(n0))


def test_day_one_ages_day_zero(spark, spark_cfg, chain):
    rows = read_table(spark, spark_cfg.warehouse, "aged_heat", TRACE).collect()
    day = {n: {(r["device"], r["extent_id"]): r for r in rows if r["interval_id"] == n} for n in (0, 1)}
    assert {n: (len(d), sum(r["count"] for r in d.values())) for n, d in day.items()} == {0: (21, 398), 1: (27, 653)}
    assert set(day[0]) <= set(day[1])              # an extent idle on day 1 keeps an aged count
    for r in day[0].values():
        assert r["aged_count"] == pytest.approx(ALPHA * r["count"], rel=1e-12)
    for key, r in day[1].items():
        previous = day[0][key]["aged_count"] if key in day[0] else 0.0
        assert r["aged_count"] == pytest.approx(ALPHA * r["count"] + (1 - ALPHA) * previous, rel=1e-12)


def test_graph_of_day_one_equals_the_incremental_rebuild(spark, spark_cfg, chain):
    """The existing --from-interval 1 path (stored units, stored interval 0, the whole trace's storage, which
    the two days are) rebuilds day 1 identically."""
    def day1():
        return table_digest(spark, spark_cfg.warehouse, "access_graph", TRACE, where=lambda r: r["interval_id"] == 1)

    nightly_day1 = day1()
    alis_graph.run(spark, spark_cfg, alis_graph.GraphOptions(TRACE, from_interval=1))
    assert day1() == nightly_day1


def test_interval_errors_name_the_missing_day(spark, spark_cfg, chain):
    with pytest.raises(aged_heat.AgingChainError, match=r"alpha 0.5\): interval 0 is not in the table; compute it "
                                                        r"first \(--interval-index 0\)"):
        aged_heat.run(spark, spark_cfg, aged_heat.AgingConfig(TRACE, alpha=0.5, interval_index=1))
    with pytest.raises(aged_heat.AgingChainError, match=r"interval 2 is after the trace's data .*end in interval 1"):
        aged_heat.run(spark, spark_cfg, aged_heat.AgingConfig(TRACE, interval_index=2))
    with pytest.raises(ValueError, match="--interval-index 2: the requests of nl-backfill end in interval 1"):
        alis_graph.run(spark, spark_cfg, alis_graph.GraphOptions(TRACE, interval_index=2))
    with pytest.raises(alis_graph.GraphParamsError, match=r"built with other min_run_length, tau;"):
        alis_graph.run(spark, spark_cfg, alis_graph.GraphOptions(TRACE, tau=5, interval_index=1))
    with pytest.raises(ValueError, match="excludes from_interval"):
        alis_graph.GraphOptions(TRACE, from_interval=1, interval_index=1)


def test_stored_intervals_read_from_the_log_equal_sparks(spark, spark_cfg, chain, monkeypatch):
    """The chain check and the previous day's values come from the files the log lists; the same rows as
    through Spark (the path taken when the reader does not handle a log)."""
    from blockheat.libs.io import delta_log

    def rows(table):
        return sorted(zip(*(table.column(c).to_pylist() for c in ("device", "extent_id", "aged_count")),
                          strict=True))

    jobs = (aged_heat.AgingConfig(TRACE), aged_heat.AgingConfig(TRACE, alpha=0.5))
    from_log = [rows(aged_heat._stored(spark, spark_cfg, job, n)) for job in jobs for n in (0, 1, 2)]

    def unreadable(root, version=None):
        raise delta_log.LogUnreadable(f"{root}: refused by the test")

    monkeypatch.setattr(delta_log, "snapshot", unreadable)
    through_spark = [rows(aged_heat._stored(spark, spark_cfg, job, n)) for job in jobs for n in (0, 1, 2)]
    assert from_log == through_spark
    assert [len(r) for r in from_log] == [21, 27, 0, 0, 0, 0]
    assert sum(a for *_, a in from_log[0]) == pytest.approx(0.8 * 398, rel=1e-12)   # day 0: alpha x count


def test_trace_rows_at_a_version_equal_sparks(spark, spark_cfg, chain):
    """libs.io.tables.trace_rows: from the log at a version (requests: string partitions), through Spark where
    the reader refuses (aged_heat: a long partition column), the rows Spark gives at that version."""
    wh = spark_cfg.warehouse
    for name, version, n in (("requests", table_version(wh, "requests"), 398 + 653), ("aged_heat", chain, 21),
                             ("aged_heat", None, 21 + 27)):
        got = trace_rows(spark, wh, name, TRACE, version=version)
        want = [r.asDict(recursive=True) for r in read_table(spark, wh, name, TRACE, version=version).collect()]
        assert len(got) == n
        assert sorted(got, key=repr) == sorted(want, key=repr), name


def test_delta_commits_match_delta(spark, spark_cfg, chain):
    """libs.nightly's versions and commits (delta-rs's history) against Delta's own history of the table; the
    rows written are the replace's (its blockheat.metrics), day 1's rows."""
    from delta.tables import DeltaTable

    table = table_path(spark_cfg.warehouse, "aged_heat")
    history = DeltaTable.forPath(spark, table).history(1).first()
    assert nightly.table_versions(spark_cfg.warehouse, ("aged_heat",)) == {"aged_heat": history["version"]}
    commits = nightly.delta_commits(table, chain)
    assert [c["version"] for c in commits] == [chain + 1] == [history["version"]]
    assert commits[0]["operation"] == history["operation"]
    day1 = read_table(spark, spark_cfg.warehouse, "aged_heat", TRACE).where(F.col("interval_id") == 1).count()
    assert commits[0]["rows_written"] == day1 == 27
    digest = table_digest(spark, spark_cfg.warehouse, "aged_heat", TRACE)
    aged_heat.run(spark, spark_cfg, aged_heat.AgingConfig(TRACE, interval_index=1))     # a retry of day 1
    assert table_digest(spark, spark_cfg.warehouse, "aged_heat", TRACE) == digest
    assert [c["rows_written"] for c in nightly.delta_commits(table, chain + 1)] == [27]
