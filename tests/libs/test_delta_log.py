"""A table's files read from its Delta log without Spark (libs.delta_log): the same files as Spark's own
snapshot at every version, across a checkpoint and removes; LogUnreadable where it cannot tell (deletion
vectors), and trace_info's rows the same as Spark's collect()."""
from __future__ import annotations

from pathlib import Path

import pytest

from libs.delta_log import LogUnreadable, snapshot
from libs.tables import _rows_from_log, read_table, trace_info
from tests.conftest import HPLAJW_TRACE_ID


def _spark_files(spark, root: Path, version: int) -> set[str]:  # type: ignore[no-untyped-def]
    df = spark.read.format("delta").option("versionAsOf", version).load(str(root))
    return {f.removeprefix("file://").removeprefix("file:") for f in df.inputFiles()}   # paths, not URIs


def test_files_equal_sparks_at_every_version_across_a_checkpoint(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "t"
    schema = "k string, part string, v long"
    for i in range(8):             # a checkpoint every 3 commits: versions 3 and 6
        rows = [(f"k{i}", f"p {i % 3}/x", i * 10 + j) for j in range(3)]
        mode = "overwrite" if i in (2, 7) else "append"
        writer = spark.createDataFrame(rows, schema).coalesce(1).write.format("delta").mode(mode).partitionBy("part")
        if i == 0:
            writer = writer.option("delta.checkpointInterval", "3")
        if i == 7:
            writer = writer.option("replaceWhere", "part = 'p 1/x'")
        writer.save(str(root))
    assert (root / "_delta_log" / f"{6:020d}.checkpoint.parquet").exists()
    for version in range(8):
        snap = snapshot(root, version)
        assert snap.version == version
        assert {snap.path(a) for a in snap.files} == _spark_files(spark, root, version), version
        assert all(Path(snap.path(a)).is_file() for a in snap.files)
    latest = snapshot(root)
    assert latest.version == 7
    assert {a["partitionValues"]["part"] for a in latest.files} == {"p 0/x", "p 1/x", "p 2/x"}
    assert sum(len(spark.read.parquet(latest.path(a)).collect()) for a in latest.files) == \
        spark.read.format("delta").load(str(root)).count()


def test_deletion_vectors_are_left_to_spark(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "dv"
    spark.createDataFrame([(i,) for i in range(100)], "v long").coalesce(1).write.format("delta") \
        .option("delta.enableDeletionVectors", "true").save(str(root))
    assert len(snapshot(root).files) == 1
    spark.sql(f"DELETE FROM delta.`{root}` WHERE v < 10")
    with pytest.raises(LogUnreadable, match="deletion vector"):
        snapshot(root)
    with pytest.raises(LogUnreadable, match="no Delta log"):
        snapshot(tmp_path / "missing")


def test_trace_info_from_the_log_equals_sparks_collect(spark, spark_cfg, hplajw, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    expected = read_table(spark, spark_cfg.warehouse, "traces", HPLAJW_TRACE_ID).collect()[0].asDict(recursive=True)
    (row,) = _rows_from_log(spark_cfg.warehouse, "traces", HPLAJW_TRACE_ID)
    assert row == expected
    assert row["geometry"][0]["raw"]["ncyl"] == "1449"
    assert row["ingested_at"].tzinfo is None                # naive, as collect() gives
    assert row["start_time_utc"] is None
    assert trace_info(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID) == expected

    def unreadable(*_a, **_k):  # type: ignore[no-untyped-def]
        raise LogUnreadable("forced")
    monkeypatch.setattr("libs.delta_log.snapshot", unreadable)
    assert trace_info(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID) == expected


def test_trace_files_from_the_log_equal_the_transactions(spark, spark_cfg, hplajw, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from libs.transforms.profile_files import trace_files

    from_log = trace_files(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID)
    devices = trace_info(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID)["devices"]
    assert sorted(from_log) == sorted(devices)
    assert len(devices) >= 2
    assert all(from_log.values())

    def unreadable(*_a, **_k):  # type: ignore[no-untyped-def]
        raise LogUnreadable("forced")
    monkeypatch.setattr("libs.delta_log.snapshot", unreadable)
    through_spark = trace_files(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID)
    assert {d: sorted(p) for d, p in through_spark.items()} == {d: sorted(p) for d, p in from_log.items()}


@pytest.mark.parametrize(("protocol", "configuration", "reason"), [
    ({"minReaderVersion": 2, "minWriterVersion": 5}, {"delta.columnMapping.mode": "name"}, "column mapping mode name"),
    ({"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["v2Checkpoint"], "writerFeatures": []}, {},
     "reader protocol"),
    ({"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [], "writerFeatures": ["catalogOwned-preview"]},
     {}, "owned by a coordinator or catalog"),
    ({"minReaderVersion": 4, "minWriterVersion": 7}, {}, "reader protocol"),
])
def test_what_the_log_reader_leaves_to_spark(protocol, configuration, reason) -> None:  # type: ignore[no-untyped-def]
    from libs.delta_log import _check

    with pytest.raises(LogUnreadable, match=reason):
        _check(protocol, {"configuration": configuration}, "t/_delta_log")
    _check({"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors", "timestampNtz"],
            "writerFeatures": ["deletionVectors", "invariants"]}, {"configuration": {}}, "t/_delta_log")
