"""A table's files read from its Delta log without Spark (libs.io.delta_log): the same files as Spark's own
snapshot at every version, across a checkpoint and removes; LogUnreadable where it cannot tell (deletion
vectors), and trace_info's rows the same as Spark's collect()."""
from __future__ import annotations

from pathlib import Path

import pytest

from libs.io.delta_log import LogUnreadable, snapshot
from libs.io.tables import read_table, rows_from_log, trace_info
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
    (row,) = rows_from_log(spark_cfg.warehouse, "traces", HPLAJW_TRACE_ID)
    assert row == expected
    assert row["geometry"][0]["raw"]["ncyl"] == "1449"
    assert row["ingested_at"].tzinfo is None                # naive, as collect() gives
    assert row["start_time_utc"] is None
    assert trace_info(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID) == expected

    def unreadable(*_a, **_k):  # type: ignore[no-untyped-def]
        raise LogUnreadable("forced")
    monkeypatch.setattr("libs.io.delta_log.snapshot", unreadable)
    assert trace_info(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID) == expected


def test_trace_files_from_the_log_equal_the_transactions(spark, spark_cfg, hplajw, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from libs.io.device_pass import trace_files

    from_log = trace_files(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID)
    devices = trace_info(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID)["devices"]
    assert sorted(from_log) == sorted(devices)
    assert len(devices) >= 2
    assert all(from_log.values())

    def unreadable(*_a, **_k):  # type: ignore[no-untyped-def]
        raise LogUnreadable("forced")
    monkeypatch.setattr("libs.io.delta_log.snapshot", unreadable)
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
    from libs.io.delta_log import _check

    with pytest.raises(LogUnreadable, match=reason):
        _check(protocol, {"configuration": configuration}, "t/_delta_log")
    _check({"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors", "timestampNtz"],
            "writerFeatures": ["deletionVectors", "invariants"]}, {"configuration": {}}, "t/_delta_log")


def _version0(root: Path) -> tuple[dict, dict]:  # type: ignore[type-arg]
    """Version 0's actions by kind and its checksum, without what differs by nature between two tables
    (ids, times, the engine's name)."""
    import json

    actions = {}
    for line in (root / "_delta_log" / f"{0:020d}.json").read_text().splitlines():
        (kind, action), = json.loads(line).items()
        actions[kind] = action
    checksum = json.loads((root / "_delta_log" / f"{0:020d}.crc").read_text())
    for meta in (actions["metaData"], checksum["metadata"]):
        assert meta.pop("id")
        assert meta.pop("createdTime")
    for key in ("timestamp", "engineInfo", "txnId"):
        assert actions["commitInfo"].pop(key)
    assert checksum.pop("txnId")
    return actions, checksum


def test_a_created_table_is_the_one_deltas_create_table_makes(spark, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import json

    from libs.io import tables as T

    monkeypatch.setattr("libs.io.tables.registers_names", lambda _s: False)   # the session's own names stay
    ours = T.ensure_table(spark, tmp_path / "ours", "extent_heat")
    with monkeypatch.context() as m:
        m.setattr(T, "_plain_table_defaults", lambda _s: False)
        theirs = T.ensure_table(spark, tmp_path / "theirs", "extent_heat")
    assert _version0(ours) == _version0(theirs)
    assert _version0(ours)[0]["metaData"]["partitionColumns"] == ["trace_id", "extent_bytes"]
    assert T.ensure_table(spark, tmp_path / "ours", "extent_heat") == ours             # there already: kept

    schema, _ = T.TABLES["extent_heat"]
    row = {f.name: {"long": 7, "double": 0.5}.get(f.dataType.typeName(), "d0") for f in schema.fields}
    where = {"trace_id": "t1", "extent_bytes": 1 << 20}
    frame = spark.createDataFrame([{**row, **where}], schema)
    for wh in ("ours", "theirs"):
        T.replace_rows(frame, spark, tmp_path / wh, "extent_heat", where)
    read = [spark.read.format("delta").load(str(p)).collect() for p in (ours, theirs)]
    assert read[0] == read[1]
    assert [r["requests"] for r in read[0]] == [7]
    columns = ("partitionColumns", "properties", "minReaderVersion", "minWriterVersion", "numFiles")
    detail = [spark.sql(f"DESCRIBE DETAIL delta.`{p}`").select(*columns).collect() for p in (ours, theirs)]
    assert detail[0] == detail[1]
    assert detail[0][0]["properties"] == {"delta.dataSkippingStatsColumns": T.STATS_COLUMNS["extent_heat"]}
    after = json.loads((ours / "_delta_log" / f"{1:020d}.crc").read_text())   # the commit's checksum, from ours
    assert len(after["allFiles"]) == after["numFiles"] == 1
    assert sum(after["fileSizeHistogram"]["fileCounts"]) == 1                 # version 0's histogram, carried on


def test_session_table_defaults_leave_creation_to_delta(spark, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from libs.io import tables as T

    monkeypatch.setattr("libs.io.tables.registers_names", lambda _s: False)
    key = "spark.databricks.delta.properties.defaults.checkpointInterval"
    spark.conf.set(key, "7")
    try:
        assert not T._plain_table_defaults(spark)
        path = T.ensure_table(spark, tmp_path, "traces")
    finally:
        spark.conf.unset(key)
    assert T._plain_table_defaults(spark)
    assert snapshot(path).metadata["configuration"] == {"delta.checkpointInterval": "7"}   # Delta's own create


def test_create_table_writes_version_0_once(tmp_path: Path) -> None:
    from libs.io.delta_log import create_table

    schema = '{"type":"struct","fields":[{"name":"v","type":"long","nullable":true,"metadata":{}}]}'
    assert create_table(tmp_path / "t", schema, [], {})
    first = (tmp_path / "t" / "_delta_log" / f"{0:020d}.json").read_bytes()
    assert not create_table(tmp_path / "t", schema.replace('"v"', '"w"'), [], {})     # another writer was first
    assert (tmp_path / "t" / "_delta_log" / f"{0:020d}.json").read_bytes() == first
    assert sorted(p.name for p in (tmp_path / "t" / "_delta_log").iterdir()) == [f"{0:020d}.crc", f"{0:020d}.json"]
    snap = snapshot(tmp_path / "t")
    assert (snap.version, snap.files, snap.metadata["schemaString"]) == (0, (), schema)
