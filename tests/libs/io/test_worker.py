"""The task functions' wrapper (libs.io.worker.python_task): the objects alive at a task's start frozen out of the
daemon's collection, PySpark's argument count and type hints kept (grouped functions with and without the key,
cogrouped ones), and every mapInArrow / applyInArrow of the package wrapped."""
from __future__ import annotations

import ast
import gc
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from blockheat.libs.io import worker
from blockheat.libs.io.worker import python_task, release_after_stage

REPO = Path(__file__).resolve().parents[3]


def _frozen_counts(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    frozen = gc.get_freeze_count()
    for batch in batches:
        yield pa.RecordBatch.from_arrays([pa.array([frozen] * batch.num_rows, pa.int64())], names=["frozen"])


def test_a_task_freezes_what_its_worker_holds(spark):
    rows = spark.range(0, 4, numPartitions=2).mapInArrow(python_task(_frozen_counts), "frozen long").collect()
    # The worker's modules (pyspark, pyarrow and this test's) are all frozen before the task's own work.
    assert len(rows) == 4
    assert min(r.frozen for r in rows) > 10_000
    plain = spark.range(0, 2, numPartitions=1).mapInArrow(_frozen_counts, "frozen long").collect()
    assert len(plain) == 2                                  # the unwrapped function runs too (nothing else asserted:
                                                            # a reused worker may have frozen before)


def test_in_process_the_wrapper_freezes_and_returns_the_result():
    gc.unfreeze()
    try:
        assert python_task(lambda x: x + 1)(41) == 42
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_kept_memory_is_released_before_a_task_of_another_stage(monkeypatch):
    """release_after_stage: outside Spark at once; in a task, not before the same stage's next task, and once before
    the first task of another stage (before its function runs)."""
    released: list[str] = []
    release_after_stage(lambda: released.append("now"))
    assert released == ["now"]
    stage = {"id": 3}
    monkeypatch.setattr(worker, "_stage", lambda: stage["id"])
    monkeypatch.setattr(worker, "_kept", None)
    task = python_task(lambda x: released.append(f"task {x}"))
    release_after_stage(lambda: released.append("kept of 3"))
    task(1)
    assert released == ["now", "task 1"]                   # the same stage: kept for it
    stage["id"] = 4
    task(2)
    task(3)
    assert released == ["now", "task 1", "kept of 3", "task 2", "task 3"]
    gc.unfreeze()


def _stage_ids(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        yield pa.RecordBatch.from_arrays([pa.array([worker._stage()] * batch.num_rows, pa.int64())], names=["stage"])


def _stages(spark, partitions: int) -> set[int | None]:  # type: ignore[no-untyped-def]
    frame = spark.range(0, 2 * partitions, numPartitions=partitions)
    return {r.stage for r in frame.mapInArrow(python_task(_stage_ids), "stage long").collect()}


def test_a_task_knows_its_stage(spark):
    first, second = _stages(spark, 2), _stages(spark, 1)
    assert len(first) == 1                                  # one stage per job here, its tasks alike
    assert len(second) == 1
    assert None not in first | second
    assert first != second


def _sum_by_key(key: tuple, table: pa.Table) -> pa.Table:
    return pa.table({"k": [key[0]], "total": [pc.sum(table["v"]).as_py()]})


def _sum_table(table: pa.Table) -> pa.Table:
    return pa.table({"k": [table["k"][0].as_py()], "total": [pc.sum(table["v"]).as_py()]})


def _both_sides(left: pa.Table, right: pa.Table) -> pa.Table:
    return pa.table({"k": [left["k"][0].as_py()], "total": [pc.sum(left["v"]).as_py() + pc.sum(right["v"]).as_py()]})


def test_grouped_functions_keep_their_arguments(spark):
    frame = spark.createDataFrame([(1, 10), (1, 5), (2, 7)], "k long, v long")
    want = [(1, 15), (2, 7)]
    for fn in (_sum_by_key, _sum_table):                   # PySpark passes the key when the function takes two
        got = frame.groupBy("k").applyInArrow(python_task(fn), "k long, total long").collect()
        assert sorted((r.k, r.total) for r in got) == want
    both = frame.groupBy("k").cogroup(frame.groupBy("k")).applyInArrow(python_task(_both_sides), "k long, total long")
    assert sorted((r.k, r.total) for r in both.collect()) == [(1, 30), (2, 14)]


def test_signature_and_hints_are_fn_s():
    import inspect

    wrapped = python_task(_sum_by_key)
    assert inspect.signature(wrapped) == inspect.signature(_sum_by_key)
    assert inspect.getfullargspec(wrapped).args == ["a", "b"]
    with pytest.raises(TypeError, match="1 to 3 positional arguments"):
        python_task(lambda: None)


TASK_CALLS = ("mapInArrow", "applyInArrow", "mapInPandas", "applyInPandas")


def _task_calls(source: str) -> list[tuple[int, bool]]:
    """(line, wrapped) of every task-function call in the source."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in TASK_CALLS:
            first = node.args[0] if node.args else None
            out.append((node.lineno, isinstance(first, ast.Call) and isinstance(first.func, ast.Name)
                        and first.func.id == "python_task"))
    return out


def test_every_task_function_of_the_package_is_wrapped():
    calls = {f"{p.relative_to(REPO)}:{line}": wrapped for top in ("libs", "jobs")
             for p in sorted((REPO / top).rglob("*.py")) for line, wrapped in _task_calls(p.read_text())}
    assert [c for c, wrapped in calls.items() if not wrapped] == []
    assert len(calls) >= 17                                 # the device passes, ingest, profile, ALIS, task Parquet
    assert _task_calls("df.mapInArrow(fn, ddl)\ng.applyInArrow(python_task(fn), ddl)") == [(1, False), (2, True)]
