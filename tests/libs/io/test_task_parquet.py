"""Parquet written by the tasks themselves (libs.io.task_parquet): the same rows as Spark's mapInArrow,
only the successful attempts' files kept, clear errors, scratch directories removed; the same on an object store
(tests/fake_store.py)."""
from __future__ import annotations

import ctypes
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from blockheat.libs.io import storage, task_parquet
from blockheat.libs.io.task_parquet import scratch_dir, sink_parquet, sink_parquet_groups, sink_parquet_groups_multi
from tests.builders import python_child
from tests.fake_store import fake_s3

DDL = "key long, label string, value double"


def _square(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        k = batch.column("id")
        yield pa.RecordBatch.from_arrays(
            [k, pa.array([f"k{v}" for v in k.to_pylist()]), pa.compute.multiply(k, k).cast(pa.float64())],
            names=["key", "label", "value"])


def test_same_rows_as_spark_map_in_arrow(spark, tmp_path):
    frame = spark.range(0, 5000, numPartitions=3)
    got = sink_parquet(frame, _square, DDL, str(tmp_path / "out"))
    assert got.schema.simpleString() == "struct<key:bigint,label:string,value:double>"
    assert sorted(got.collect()) == sorted(frame.mapInArrow(_square, DDL).collect())
    assert sorted(r.key for r in got.collect()) == list(range(5000))
    assert len(list((tmp_path / "out").iterdir())) == 3                   # one file per task


def _with_a_stray_file(directory: str):  # type: ignore[no-untyped-def]
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # What a killed attempt leaves: a file in the directory that no successful task reports.
        pq.write_table(pa.table({"key": [-1], "label": ["stray"], "value": [0.0]}),
                       f"{directory}/part-99999-stray.parquet")
        yield from _square(batches)

    return run


def test_files_of_other_attempts_are_removed_and_not_read(spark, tmp_path):
    out = tmp_path / "out"
    got = sink_parquet(spark.range(0, 100, numPartitions=2), _with_a_stray_file(str(out)), DDL, str(out))
    assert sorted(r.key for r in got.collect()) == list(range(100))
    assert not (out / "part-99999-stray.parquet").exists()


def test_no_output_gives_an_empty_frame_with_the_schema(spark, tmp_path):
    got = sink_parquet(spark.range(0, 10, numPartitions=2).where("id < 0"), _square, DDL, str(tmp_path / "out"))
    assert got.count() == 0
    assert got.columns == ["key", "label", "value"]


def test_a_directory_in_use_is_refused(spark, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.parquet").write_bytes(b"")
    with pytest.raises(FileExistsError, match=r"out: the task Parquet sink needs an empty directory"):
        sink_parquet(spark.range(3), _square, DDL, str(tmp_path / "out"))


def _fail_inside(tmp_path, seen: list) -> None:  # type: ignore[no-untyped-def, type-arg]
    with scratch_dir(tmp_path, "job") as where:
        (where / "x").write_text("1")
        seen.append(where)
        raise RuntimeError("boom")


def test_scratch_dir_is_removed_even_on_error(tmp_path):
    seen: list = []  # type: ignore[type-arg]
    with pytest.raises(RuntimeError, match="boom"):
        _fail_inside(tmp_path, seen)
    assert seen[0].parent == tmp_path / "_scratch"
    assert seen[0].name.startswith("job-")
    assert not (tmp_path / "_scratch").exists()


def _tally(table: pa.Table) -> pa.Table:
    key = table.column("key")[0].as_py()
    return pa.table({"key": [key] * 2, "label": [f"n{table.num_rows}", "again"], "value": [float(key)] * 2})


def test_grouped_output_written_per_group(spark, tmp_path):
    frame = spark.range(0, 60, numPartitions=3).selectExpr("id % 4 AS key")
    got = sink_parquet_groups(frame.groupBy("key"), _tally, DDL, str(tmp_path / "out"))
    assert sorted(got.collect()) == sorted(frame.groupBy("key").applyInArrow(_tally, DDL).collect())
    assert sorted((r.key, r.label) for r in got.collect() if r.label != "again") == [
        (0, "n15"), (1, "n15"), (2, "n15"), (3, "n15")]
    assert len(list((tmp_path / "out").iterdir())) == 4                   # one file per group


# --- an object-store location (tests/fake_store.py: s3a://bucket/... on a local directory) ------------------------


def _read_back_with_pyarrow(spark, ddl, files):  # type: ignore[no-untyped-def]
    """What Spark's Parquet reader gives for the files, read through libs.io.storage (Spark's own reader knows
    no fake store)."""
    tables = [pq.read_table(where, filesystem=fs) for fs, where in map(storage.filesystem, files)]
    rows = [tuple(r.values()) for t in tables for r in t.to_pylist()]
    return spark.createDataFrame(rows, ddl)


def _with_a_stray_object(directory: str, opener):  # type: ignore[no-untyped-def]
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        fs, root = opener(directory)
        pq.write_table(pa.table({"key": [-1], "label": ["stray"], "value": [0.0]}),
                       f"{root}/part-99999-stray.parquet", filesystem=fs)
        yield from _square(batches)

    return run


def test_sink_on_an_object_store_keeps_only_the_reported_files(spark, tmp_path, monkeypatch):
    """The tasks write through storage.filesystem as the driver has it; the driver lists and deletes the stray
    file through the store, and reads back the reported files' locations (URIs)."""
    store = fake_s3(monkeypatch, tmp_path / "s3")
    monkeypatch.setattr(task_parquet, "_read_back", _read_back_with_pyarrow)
    out = store.url("wh/_scratch/job/out")
    got = sink_parquet(spark.range(0, 100, numPartitions=2), _with_a_stray_object(out, storage.filesystem), DDL,
                       out + "/")
    assert sorted(r.key for r in got.collect()) == list(range(100))
    names = sorted(p.name for p in store.local(out).iterdir())
    assert len(names) == 2
    assert "part-99999-stray.parquet" not in names
    with pytest.raises(FileExistsError, match=r"s3a://bucket/wh/_scratch/job/out: the task Parquet sink needs"):
        sink_parquet(spark.range(3), _square, DDL, out)


def _split_with_a_stray(directory: str, opener):  # type: ignore[no-untyped-def]
    def split(table: pa.Table) -> dict[str, pa.Table]:
        fs, root = opener(directory)
        pq.write_table(pa.table({"key": [-1], "label": ["stray"], "value": [0.0]}),
                       f"{root}/a/part-99999-stray.parquet", filesystem=fs)
        return _split(table)

    return split


def _split(table: pa.Table) -> dict[str, pa.Table]:
    key = table.column("key")[0].as_py()
    return {"a": pa.table({"key": [key], "label": ["a"], "value": [float(table.num_rows)]}),
            "b": pa.table({"key": [key] * (key % 2), "label": ["b"] * (key % 2), "value": [0.0] * (key % 2)})}


def test_multi_output_sink_on_an_object_store(spark, tmp_path, monkeypatch):
    store = fake_s3(monkeypatch, tmp_path / "s3")
    monkeypatch.setattr(task_parquet, "_read_back", _read_back_with_pyarrow)
    out = store.url("wh/_scratch/multi")
    frame = spark.range(0, 40, numPartitions=2).selectExpr("id % 4 AS key")
    got = sink_parquet_groups_multi(frame.groupBy("key"), _split_with_a_stray(out, storage.filesystem),
                                    {"a": DDL, "b": DDL}, out)
    assert sorted((r.key, r.value) for r in got["a"].collect()) == [(0, 10.0), (1, 10.0), (2, 10.0), (3, 10.0)]
    assert sorted(r.key for r in got["b"].collect()) == [1, 3]
    assert sorted(p.name for p in store.local(out).iterdir()) == ["a", "b"]
    assert len(list((store.local(out) / "a").iterdir())) == 4                       # one file per group, no stray
    assert len(list((store.local(out) / "b").iterdir())) == 2


def _fail_inside_the_store(store, seen: list) -> None:  # type: ignore[no-untyped-def, type-arg]
    with scratch_dir(store.url("wh"), "job") as where:
        seen.append(where)
        storage.write_bytes(storage.join(where, "part", "x"), b"1")
        assert store.local(where).is_dir()
        raise RuntimeError("boom")


def test_scratch_dir_on_an_object_store_is_removed_even_on_error(tmp_path, monkeypatch):
    store = fake_s3(monkeypatch, tmp_path / "s3")
    seen: list = []  # type: ignore[type-arg]
    with pytest.raises(RuntimeError, match="boom"):
        _fail_inside_the_store(store, seen)
    assert isinstance(seen[0], str)
    assert seen[0].startswith("s3a://bucket/wh/_scratch/job-")
    assert not store.local(seen[0]).exists()
    assert list(storage.files_under(store.url("wh/_scratch"))) == []


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


def _malloc_info() -> _MallInfo2:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    return libc.mallinfo2()


def test_a_reused_heap_keeps_large_arrays_in_the_heap_and_then_maps_them_again():
    """Inside reused_heap a 64 MiB array comes from glibc's heap (no mapping of its own) and stays there once freed,
    for the next one; after it, glibc's usual 32 MiB threshold maps such an array on its own again."""
    size = 64 << 20
    with task_parquet.reused_heap():
        mapped = _malloc_info().hblkhd
        block = np.ones(size // 8)
        assert _malloc_info().hblkhd - mapped < size
        del block
        assert _malloc_info().fordblks >= size               # freed, kept in the heap for the next array
        again = np.ones(size // 8)
        assert _malloc_info().hblkhd - mapped < size
        del again
    mapped = _malloc_info().hblkhd
    block = np.ones(size // 8)
    assert _malloc_info().hblkhd - mapped >= size
    del block


_MAPPED_CHILD = """
import numpy as np
from blockheat.libs.io import task_parquet as T
from tests.libs.io.test_task_parquet import _malloc_info

size = T.MAPPED_BYTES * 2
np.ones(2 << 20)                # a 16 MiB array mapped and freed: glibc's dynamic threshold rises to 16 MiB
with T.mapped_arrays():
    mapped, free = _malloc_info().hblkhd, _malloc_info().fordblks
    block = np.ones(size // 8)
    print(_malloc_info().hblkhd - mapped >= size)             # a mapping of its own
    del block
    print(_malloc_info().hblkhd - mapped < size, _malloc_info().fordblks - free < size)   # gone, not kept
    small = np.ones(T.MAPPED_BYTES // 16)                          # half of MAPPED_BYTES: from the heap
    print(_malloc_info().hblkhd - mapped < T.MAPPED_BYTES // 2)
mapped = _malloc_info().hblkhd
block = np.ones(size // 8)
print(_malloc_info().hblkhd - mapped < size)                  # the usual threshold again: from the heap
"""


def test_mapped_arrays_map_arrays_of_a_few_mib_and_unmap_them_when_freed():
    """Inside mapped_arrays an array of MAPPED_BYTES or more gets a mapping of its own, gone when it is freed (not
    kept in the heap); after it, glibc's usual 32 MiB threshold serves such an array from the heap again. In a
    fresh process: glibc serves any request its heap's free chunks can hold from them first (other tests leave
    some)."""
    done = python_child(_MAPPED_CHILD)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True"] * 5
