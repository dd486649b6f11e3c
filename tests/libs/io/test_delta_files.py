"""Delta tables written by the tasks themselves (libs.io.delta_files): the rows, partition values,
statistics and history Delta's own writer would give, atomic replace, nothing left after a failure."""
from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import types as T

from blockheat.libs.io.delta_files import (
    ABANDONED_DIR,
    HIVE_NULL,
    FileWriter,
    TableTarget,
    WriteAbandoned,
    commit_replace,
    discard,
    escape_partition,
    replace_by_tasks,
)

SCHEMA = T.StructType([
    T.StructField("trace_id", T.StringType(), False),
    T.StructField("device", T.StringType(), True),
    T.StructField("seq", T.LongType(), False),
    T.StructField("value", T.DoubleType(), True),
])


def _target(spark, root: Path) -> TableTarget:  # type: ignore[no-untyped-def]
    from delta.tables import DeltaTable
    from pyspark.sql.pandas.types import to_arrow_schema

    DeltaTable.create(spark).location(str(root)).addColumns(SCHEMA).partitionedBy("trace_id", "device").execute()
    return TableTarget("t", str(root), to_arrow_schema(SCHEMA), ("trace_id", "device"), ("seq",), uuid.uuid4().hex)


def _frame(spark, trace: str, n: int, devices: tuple[str | None, ...] = ("d0", "d1")):  # type: ignore[no-untyped-def]
    rows = [(trace, devices[i % len(devices)], i, i / 2) for i in range(n)]
    return spark.createDataFrame(rows, SCHEMA).repartition(3)


def _rows(spark, root: Path, version: int | None = None) -> list[tuple]:  # type: ignore[no-untyped-def]
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return sorted((tuple(r) for r in reader.load(str(root)).collect()), key=lambda r: (r[2], r))


def _log(root: Path, version: int) -> list[dict]:
    return [json.loads(line) for line in (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines()]


def test_replace_writes_the_rows_and_leaves_other_traces(spark, tmp_path):
    root = tmp_path / "t"
    target = _target(spark, root)
    assert replace_by_tasks(spark, target, {"trace_id": "a"}, _frame(spark, "a", 1000)) == 1
    assert replace_by_tasks(spark, target, {"trace_id": "b"}, _frame(spark, "b", 10)) == 2
    assert replace_by_tasks(spark, target, {"trace_id": "a"}, _frame(spark, "a", 7, ("d2",))) == 3
    expected = sorted([("a", "d2", i, i / 2) for i in range(7)] + [("b", ("d0", "d1")[i % 2], i, i / 2)
                                                                    for i in range(10)], key=lambda r: (r[2], r))
    assert _rows(spark, root) == expected
    assert len(_rows(spark, root, version=1)) == 1000                 # time travel sees the first replace
    info = next(a["commitInfo"] for a in _log(root, 3) if "commitInfo" in a)
    assert info["operation"] == "WRITE"
    assert info["blockheat.replace"] == "trace_id = 'a'"
    metrics = json.loads(info["blockheat.metrics"])
    assert metrics["numOutputRows"] == 7
    assert metrics["numRemovedFiles"] == len([a for a in _log(root, 1) if "add" in a])
    removed = [a["remove"]["path"] for a in _log(root, 3) if "remove" in a]
    assert removed
    assert all(p.startswith("trace_id=a/") for p in removed)          # b's files untouched


def test_statistics_and_partition_values_are_those_of_the_rows(spark, tmp_path):
    root = tmp_path / "t"
    target = _target(spark, root)
    replace_by_tasks(spark, target, {"trace_id": "a"}, _frame(spark, "a", 300).coalesce(1))
    adds = [a["add"] for a in _log(root, 1) if "add" in a]
    by_device = {a["partitionValues"]["device"]: json.loads(a["stats"]) for a in adds}
    assert by_device["d0"] == {"numRecords": 150, "minValues": {"seq": 0}, "maxValues": {"seq": 298},
                               "nullCount": {"seq": 0}}
    assert by_device["d1"]["minValues"] == {"seq": 1}
    assert by_device["d1"]["maxValues"] == {"seq": 299}
    assert all(a["partitionValues"]["trace_id"] == "a" and a["size"] == (root / a["path"]).stat().st_size
               for a in adds)
    # Delta prunes files by these statistics: a scan for seq > 298 reads d1's file only.
    scanned = spark.read.format("delta").load(str(root)).where("seq > 298").inputFiles()
    assert [Path(s).name for s in scanned] == [Path(a["path"]).name for a in adds
                                               if a["partitionValues"]["device"] == "d1"]


def test_odd_and_null_partition_values_round_trip(spark, tmp_path):
    root = tmp_path / "t"
    target = _target(spark, root)
    odd = "disk 0:a/b=c%d#e"
    replace_by_tasks(spark, target, {"trace_id": "a"}, _frame(spark, "a", 6, (odd, None)))
    assert _rows(spark, root) == [("a", (odd, None)[i % 2], i, i / 2) for i in range(6)]
    dirs = {p.parent.name for p in (root / "trace_id=a").glob("*/*.parquet")}
    assert dirs == {f"device={escape_partition(odd)}", f"device={HIVE_NULL}"}
    assert escape_partition(odd) == "disk 0%3Aa%2Fb%3Dc%25d%23e"


def test_many_batches_of_one_partition_make_one_file_with_merged_statistics(tmp_path):
    schema = pa.schema([pa.field("trace_id", pa.string(), False), pa.field("device", pa.string()),
                        pa.field("seq", pa.int64(), False), pa.field("value", pa.float64())])
    (tmp_path / "t").mkdir()
    writer = FileWriter(TableTarget("t", str(tmp_path / "t"), schema, ("trace_id", "device"), ("seq",), "w1"))
    for start in (50, 0, 20):
        writer.write(pa.table({"seq": pa.array(range(start, start + 10)), "value": pa.nulls(10, pa.float64()),
                               "device": ["x"] * 10, "trace_id": ["a"] * 10}))
    (row,) = writer.close().to_pylist()
    assert json.loads(row["stats"]) == {"numRecords": 30, "minValues": {"seq": 0}, "maxValues": {"seq": 59},
                                        "nullCount": {"seq": 0}}
    data = pq.read_table(tmp_path / "t" / row["path"])
    assert data.column_names == ["seq", "value"]
    assert data.num_rows == row["rows"] == 30
    seq = pq.ParquetFile(tmp_path / "t" / row["path"]).metadata.row_group(0).column(0)    # storage.parquet_options
    assert (seq.path_in_schema, seq.compression) == ("seq", "UNCOMPRESSED")
    assert "DELTA_BINARY_PACKED" in seq.encodings


def test_text_columns_of_one_value_or_many_are_written_dictionary_encoded(tmp_path):
    """A text column whose rows hold one value becomes a dictionary of that entry without hashing the rows; one of
    several values, nulls or none is encoded as before; each reads back as written."""
    schema = pa.schema([pa.field("trace_id", pa.string(), False), pa.field("device", pa.string()),
                        pa.field("seq", pa.int64(), False)])
    (tmp_path / "t").mkdir()
    writer = FileWriter(TableTarget("t", str(tmp_path / "t"), schema, ("trace_id",), ("seq",), "w1"))
    cases = {"a": pa.repeat(pa.scalar("dev-7", pa.string()), 4), "b": pa.array(["x", "y", "x", "x"]),
             "c": pa.array(["x", None, "x", "x"]), "d": pa.nulls(4, pa.string())}
    for trace, device in cases.items():
        writer.write(pa.table({"trace_id": [trace] * 4, "device": device, "seq": pa.array(range(4))}))
    rows = {json.loads(r["partition"])["trace_id"]: r for r in writer.close().to_pylist()}
    for trace, device in cases.items():
        data = pq.read_table(tmp_path / "t" / rows[trace]["path"])
        assert data.column("device").to_pylist() == device.to_pylist()
        assert pa.types.is_dictionary(data.schema.field("device").type)
    assert len(pq.read_table(tmp_path / "t" / rows["a"]["path"]).column("device").chunk(0).dictionary) == 1


def _failing(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        yield batch
        if pc.max(batch.column("seq")).as_py() > 900:
            raise RuntimeError("decoder failed")


def test_a_failed_write_commits_nothing_and_leaves_no_file(spark, tmp_path):
    root = tmp_path / "t"
    target = _target(spark, root)
    replace_by_tasks(spark, target, {"trace_id": "a"}, _frame(spark, "a", 10))
    before = sorted(root.rglob("*.parquet"))
    with pytest.raises(Exception, match="decoder failed"):
        replace_by_tasks(spark, target, {"trace_id": "a"}, _frame(spark, "a", 1000), _failing)
    assert sorted(root.rglob("*.parquet")) == before                 # the other tasks' files are gone
    assert _rows(spark, root) == [("a", ("d0", "d1")[i % 2], i, i / 2) for i in range(10)]


def test_files_of_failed_attempts_are_deleted_after_the_commit(spark, tmp_path):
    root = tmp_path / "t"
    target = _target(spark, root).for_write()
    writer = FileWriter(target)
    writer.write(pa.table({"trace_id": ["a"] * 3, "device": ["d0"] * 3, "seq": [0, 1, 2], "value": [0.0] * 3}))
    reported = writer.close().to_pylist()
    stray = root / "trace_id=a" / "device=d0" / f"part-00007-{target.write_id}-killed.parquet"
    stray.write_bytes(b"PAR1")                                      # what a killed attempt leaves
    other = root / "trace_id=a" / "device=d0" / "part-00001-another-write.parquet"
    other.write_bytes(b"PAR1")                                      # not this write's: left alone
    commit_replace(spark, target, {"trace_id": "a"}, reported)
    assert not stray.exists()
    assert other.exists()
    assert not (root / ABANDONED_DIR).exists()                      # a committed write is not abandoned
    assert _rows(spark, root) == [("a", "d0", i, 0.0) for i in range(3)]


@pytest.mark.parametrize("flushed", [False, True], ids=["buffered", "open files"])
def test_a_task_closing_its_files_after_its_write_was_discarded_deletes_them(tmp_path, flushed):
    schema = pa.schema([pa.field("trace_id", pa.string(), False), pa.field("device", pa.string()),
                        pa.field("seq", pa.int64(), False), pa.field("value", pa.float64())])
    root = tmp_path / "t"
    target = TableTarget("t", str(root), schema, ("trace_id", "device"), ("seq",)).for_write()
    writer = FileWriter(target, buffer_rows=1 if flushed else 1 << 20)   # a task of a job that failed meanwhile
    writer.write(pa.table({"trace_id": ["a"] * 4, "device": ["d0", "d1"] * 2, "seq": [0, 1, 2, 3],
                           "value": [0.0] * 4}))
    assert len(list(root.rglob("*.parquet"))) == (2 if flushed else 0)
    assert discard(target) == (2 if flushed else 0)                  # the driver, after the job failed
    assert (root / ABANDONED_DIR / target.write_id).is_file()
    with pytest.raises(WriteAbandoned, match=f"write {target.write_id} was discarded"):
        writer.close()
    assert list(root.rglob("*.parquet")) == []
    other = FileWriter(dataclasses.replace(target, write_id="another"))  # another write of the table is not affected
    other.write(pa.table({"trace_id": ["a"], "device": ["d0"], "seq": [9], "value": [1.0]}))
    assert other.close().column("rows").to_pylist() == [1]


def test_a_predicate_on_other_columns_removes_uniform_files_and_rewrites_mixed_ones(spark, tmp_path):
    root = tmp_path / "t"
    target = _target(spark, root)
    # A file Delta's own writer made, holding rows of both values.
    legacy = [("a", "d0", i, float(i % 2)) for i in range(6)]
    spark.createDataFrame(legacy, SCHEMA).coalesce(1).write.format("delta").mode("append").save(str(root))
    new = spark.createDataFrame([("a", "d0", 100 + i, 1.0) for i in range(3)], SCHEMA).coalesce(1)
    replace_by_tasks(spark, target, {"trace_id": "a", "value": 1.0}, new)
    kept = [("a", "d0", i, 0.0) for i in (0, 2, 4)]
    assert _rows(spark, root) == kept + [("a", "d0", 100 + i, 1.0) for i in range(3)]
    actions = _log(root, 2)
    assert len([a for a in actions if "remove" in a]) == 1                 # the mixed file, rewritten:
    assert len([a for a in actions if "add" in a]) == 2                    # its value-0 rows, and the new rows
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["blockheat.replace"] == "trace_id = 'a' AND value = 1.0"
    # Now every file holds one value: the next replace removes the value-1 file whole and reads no other.
    added = {a["add"]["path"]: json.loads(a["add"]["stats"])["numRecords"] for a in actions if "add" in a}
    replace_by_tasks(spark, target, {"trace_id": "a", "value": 1.0},
                     spark.createDataFrame([("a", "d0", 200, 1.0)], SCHEMA))
    removed = [a["remove"]["path"] for a in _log(root, 3) if "remove" in a]
    assert [added[p] for p in removed] == [3]
    assert _rows(spark, root) == [("a", "d0", i, 0.0) for i in (0, 2, 4)] + [("a", "d0", 200, 1.0)]


def test_a_predicate_on_unknown_columns_is_refused(spark, tmp_path):
    target = _target(spark, tmp_path / "t").for_write()
    with pytest.raises(ValueError, match=r"replace of t: the predicate needs columns of the table, got \['nope'\]"):
        commit_replace(spark, target, {"nope": 3}, [])


def test_concurrent_replaces_of_one_trace_leave_one_of_them_whole(spark, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    root = tmp_path / "t"
    target = _target(spark, root)
    frames = {n: _frame(spark, "a", n) for n in (5, 8, 13, 21)}
    with ThreadPoolExecutor(4) as pool:
        versions = list(pool.map(lambda n: replace_by_tasks(spark, target, {"trace_id": "a"}, frames[n]), frames))
    assert sorted(versions) == [1, 2, 3, 4]                          # every replace committed, one at a time
    last = next(n for n, v in zip(frames, versions, strict=True) if v == 4)
    assert _rows(spark, root) == [("a", ("d0", "d1")[i % 2], i, i / 2) for i in range(last)]


def test_the_footer_tells_uniform_excluded_and_mixed_files(tmp_path):
    from blockheat.libs.io.delta_files import _uniform

    def file(name: str, w: list[int], k: list[int | None], row_group: int = 10) -> str:
        path = str(tmp_path / name)
        pq.write_table(pa.table({"w": pa.array(w, pa.int64()), "k": pa.array(k, pa.int64())}), path,
                       row_group_size=row_group)
        return path

    where = {"w": 1, "k": 5}
    assert _uniform(file("all.parquet", [1, 1], [5, 5]), where) is True
    assert _uniform(file("some.parquet", [1, 1], [5, 6]), where) is None
    assert _uniform(file("other_k.parquet", [1, 1], [7, 7]), where) is False     # w matches, k never does
    assert _uniform(file("other_w.parquet", [2, 3], [5, 5]), where) is False
    assert _uniform(file("null_k.parquet", [1, 1], [5, None]), where) is None
    assert _uniform(file("groups.parquet", [1, 1, 1, 1], [5, 5, 9, 9], row_group=2), where) is None
    assert _uniform(file("empty.parquet", [], []), where) is False
