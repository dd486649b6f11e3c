"""A table's state read through delta-rs without Spark (libs.io.delta_log): the same files as Spark's own
snapshot at every version, across a checkpoint and removes, and the same rows (read); LogUnreadable where the files
cannot be read as they are (deletion vectors, column mapping); trace_info's rows and has_rows' answers the same as
Spark's; tables created and written by delta-rs read and replaced by delta-spark and the other way round."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest

from blockheat.libs.io.delta_log import LogUnreadable, read, rows, snapshot
from blockheat.libs.io.tables import read_table, rows_from_log, trace_info
from blockheat.libs.table_io.device_pass import Unsupported
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
        snap = snapshot(str(root), version)
        assert snap.version == version
        assert {snap.path(a) for a in snap.files} == _spark_files(spark, root, version), version
        assert all(Path(snap.path(a)).is_file() for a in snap.files)
    latest = snapshot(str(root))
    assert latest.version == 7
    assert {a["partitionValues"]["part"] for a in latest.files} == {"p 0/x", "p 1/x", "p 2/x"}
    assert sum(len(spark.read.parquet(latest.path(a)).collect()) for a in latest.files) == \
        spark.read.format("delta").load(str(root)).count()
    # read(): the latest rows, by partition value (a file per partition directory) or stored column, as Spark's
    table = spark.read.format("delta").load(str(root))
    for where in ({"part": "p 1/x"}, {"k": "k5"}, {"part": "p 2/x", "k": "k5"}, {}):
        got = read(str(root), ["v", "part", "k"], where)
        assert got.column_names == ["v", "part", "k"]
        assert [str(t) for t in got.schema.types] == ["int64", "string", "string"]
        chosen = table.where(" AND ".join(f"{c} = '{v}'" for c, v in where.items()) or "true")
        assert sorted(got.to_pylist(), key=str) == sorted((r.asDict() for r in chosen.collect()), key=str), where
    assert read(str(root), ["k"], {"part": "p 1/x", "k": "k5"}).num_rows == 0
    # a stored column tested but not asked for
    assert sorted(read(str(root), ["v"], {"k": "k5"}).column("v").to_pylist()) == \
        sorted(r.v for r in table.where("k = 'k5'").collect())


def test_rows_are_to_pylists_values() -> None:
    # rows(): what Table.to_pylist() gives (UTC timestamps as aware datetimes, nulls kept), without pyarrow's own
    # conversion of a time-zoned timestamp, which loads pandas
    table = pa.table({"t": pa.array([dt.datetime(2026, 1, 2, 3, 4, 5, 6), None], pa.timestamp("us", tz="UTC")),
                      "n": pa.array([1, None], pa.int64()), "s": pa.array(["a", None], pa.string())})
    got = rows(table)
    assert got == table.to_pylist()
    assert got[0]["t"] == dt.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=dt.UTC)
    assert got[1] == {"t": None, "n": None, "s": None}


def test_deletion_vectors_are_left_to_spark(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "dv"
    spark.createDataFrame([(i,) for i in range(100)], "v long").coalesce(1).write.format("delta") \
        .option("delta.enableDeletionVectors", "true").save(str(root))
    assert len(snapshot(str(root)).files) == 1
    spark.sql(f"DELETE FROM delta.`{root}` WHERE v < 10")
    with pytest.raises(LogUnreadable, match="deletion vector"):
        snapshot(str(root))
    with pytest.raises(LogUnreadable, match="deletion vector"):
        read(str(root), ["v"])
    with pytest.raises(LogUnreadable, match="no Delta log"):
        snapshot(str(tmp_path / "missing"))


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
    monkeypatch.setattr("blockheat.libs.io.delta_log.snapshot", unreadable)
    assert trace_info(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID) == expected


def test_trace_files_from_the_log_equal_the_transactions(spark, spark_cfg, hplajw, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from blockheat.libs.table_io.device_pass import trace_files

    from_log = trace_files(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID)
    devices = trace_info(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID)["devices"]
    assert sorted(from_log) == sorted(devices)
    assert len(devices) >= 2
    assert all(from_log.values())

    def unreadable(*_a, **_k):  # type: ignore[no-untyped-def]
        raise LogUnreadable("forced")
    monkeypatch.setattr("blockheat.libs.table_io.device_pass.snapshot", unreadable)
    with pytest.raises(Unsupported, match="forced"):      # the callers take the Spark SQL form
        trace_files(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID)


def test_column_mapping_is_left_to_spark(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "cm"
    spark.sql(f"CREATE TABLE delta.`{root}` (v long) USING delta TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    spark.createDataFrame([(1,)], "v long").write.format("delta").mode("append").save(str(root))
    with pytest.raises(LogUnreadable, match="column mapping mode name"):
        snapshot(str(root))


def test_tables_of_either_engine_are_read_and_replaced_by_the_other(spark, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from delta.tables import DeltaTable

    from blockheat.libs.io import table_versions
    from blockheat.libs.io import tables as T

    monkeypatch.setattr("blockheat.libs.io.tables.registers_names", lambda _s: False)   # the session's own names stay
    ours = T.ensure_table(spark, tmp_path / "ours", "extent_heat")              # delta-rs creates it
    schema, partitions = T.TABLES["extent_heat"]
    theirs = str(tmp_path / "theirs" / "extent_heat")                           # delta-spark creates it
    DeltaTable.createIfNotExists(spark).location(theirs).addColumns(schema).partitionedBy(*partitions) \
        .property("delta.dataSkippingStatsColumns", T.STATS_COLUMNS["extent_heat"]).execute()
    assert T.ensure_table(spark, tmp_path / "ours", "extent_heat") == ours      # there already: kept
    assert snapshot(ours).metadata["partitionColumns"] == ["trace_id", "extent_bytes"]

    row = {f.name: {"long": 7, "double": 0.5}.get(f.dataType.typeName(), "d0") for f in schema.fields}
    where = {"trace_id": "t1", "extent_bytes": 1 << 20}
    frame = spark.createDataFrame([{**row, **where}], schema)
    for wh in ("ours", "theirs"):                                               # blockheat's replace on both
        T.replace_rows(frame, spark, tmp_path / wh, "extent_heat", where)
    read = [spark.read.format("delta").load(str(p)).collect() for p in (ours, theirs)]
    assert read[0] == read[1]
    assert [r["requests"] for r in read[0]] == [7]
    columns = ("partitionColumns", "properties", "minReaderVersion", "minWriterVersion", "numFiles")
    detail = [spark.sql(f"DESCRIBE DETAIL delta.`{p}`").select(*columns).collect() for p in (ours, theirs)]
    assert detail[0] == detail[1]
    assert detail[0][0]["properties"] == {"delta.dataSkippingStatsColumns": T.STATS_COLUMNS["extent_heat"]}

    # delta-spark replaces rows of the delta-rs table; blockheat then replaces them again on top of that commit
    frame.withColumn("requests", frame["requests"] + 1).write.format("delta").mode("overwrite") \
        .option("replaceWhere", "trace_id = 't1'").save(ours)
    assert [r["requests"] for r in spark.read.format("delta").load(ours).collect()] == [8]
    T.replace_rows(frame.withColumn("requests", frame["requests"] * 3), spark, tmp_path / "ours", "extent_heat", where)
    assert [r["requests"] for r in spark.read.format("delta").load(ours).collect()] == [21]
    assert len(snapshot(ours).files) == 1
    assert table_versions.table_version(tmp_path / "ours", "extent_heat") == 3


def test_create_table_makes_version_0_once(tmp_path: Path) -> None:
    import pyarrow as pa

    from blockheat.libs.io.delta_log import create_table

    root = str(tmp_path / "t")
    assert create_table(root, pa.schema([("v", pa.int64())]), [], {})
    first = (tmp_path / "t" / "_delta_log" / f"{0:020d}.json").read_bytes()
    assert not create_table(root, pa.schema([("w", pa.int64())]), [], {})     # another writer was first
    assert (tmp_path / "t" / "_delta_log" / f"{0:020d}.json").read_bytes() == first
    snap = snapshot(root)
    assert (snap.version, snap.files, snap.metadata["partitionColumns"]) == (0, (), [])


def test_has_rows_from_the_log_answers_as_spark_does(spark, spark_cfg, hplajw, monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from blockheat.libs.io.tables import has_rows

    devices = trace_info(spark, spark_cfg.warehouse, HPLAJW_TRACE_ID)["devices"]
    first = read_table(spark, spark_cfg.warehouse, "requests", HPLAJW_TRACE_ID).where("seq = 0").collect()[0]
    other = next(d for d in devices if d != first["device"])
    cases = [(HPLAJW_TRACE_ID, {}, True), ("no-such-trace", {}, False),
             (HPLAJW_TRACE_ID, {"device": devices[0]}, True), (HPLAJW_TRACE_ID, {"device": "no-such-device"}, False),
             (HPLAJW_TRACE_ID, {"seq": 0}, True), (HPLAJW_TRACE_ID, {"seq": -1}, False),
             (HPLAJW_TRACE_ID, {"device": first["device"], "seq": 0}, True),
             (HPLAJW_TRACE_ID, {"device": other, "seq": 0}, False), (HPLAJW_TRACE_ID, {"op": "W"}, True)]
    for trace_id, equal, want in cases:
        assert has_rows(spark, spark_cfg.warehouse, "requests", trace_id, equal) is want, (trace_id, equal)
    assert has_rows(spark, tmp_path, "requests", HPLAJW_TRACE_ID) is False             # no table

    def unreadable(*_a, **_k):  # type: ignore[no-untyped-def]
        raise LogUnreadable("forced")
    monkeypatch.setattr("blockheat.libs.io.delta_log.snapshot", unreadable)
    for trace_id, equal, want in cases:                                                  # Spark's answers
        assert has_rows(spark, spark_cfg.warehouse, "requests", trace_id, equal) is want, (trace_id, equal)


def test_trace_arrow_from_the_log_equals_sparks_rows(spark, spark_cfg, hplajw, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # A trace's rows as the report gathers them: partition columns (trace_id, extent_bytes, layout) and stored ones
    # (window_us) chosen, some or all columns; the same rows through Spark when the log cannot be read.
    from blockheat.jobs import extent_heat as heat_job
    from blockheat.libs.io.tables import trace_arrow

    heat_job.run(spark, spark_cfg, heat_job.HeatConfig(HPLAJW_TRACE_ID))
    cases = [("extent_heat", None, {"extent_bytes": 1 << 20, "window_us": 0}),
             ("disk_heat", ["layout", "window_us", "disk", "heat"], {"layout": "as-traced"}),
             ("disk_heat", ["disk", "requests"], {"window_us": 3_600_000_000})]

    def spark_rows(name, columns, where):  # type: ignore[no-untyped-def]
        df = read_table(spark, spark_cfg.warehouse, name, HPLAJW_TRACE_ID)
        for c, v in where.items():
            df = df.where(f"{c} = '{v}'")
        return sorted((r.asDict() for r in df.select(*(columns or df.columns)).collect()), key=str)

    got = [trace_arrow(spark, spark_cfg.warehouse, *case[:1], HPLAJW_TRACE_ID, case[1], case[2]) for case in cases]
    for table, (name, columns, where) in zip(got, cases, strict=True):
        assert sorted(table.to_pylist(), key=str) == spark_rows(name, columns, where), name
    assert [t.num_rows for t in got] == [257, 338, 1008]         # extents in use; windows x disks

    def unreadable(*_a, **_k):  # type: ignore[no-untyped-def]
        raise LogUnreadable("forced")
    monkeypatch.setattr("blockheat.libs.io.delta_log.read", unreadable)
    for name, columns, where in cases:
        rows = trace_arrow(spark, spark_cfg.warehouse, name, HPLAJW_TRACE_ID, columns, where).to_pylist()
        assert sorted(rows, key=str) == spark_rows(name, columns, where), name
