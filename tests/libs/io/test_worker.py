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

from blockheat.libs.io.worker import python_task

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
