"""libs.io.tables.scoped_version on hand-written Delta logs: which commits change a trace's (or window's) rows.

The commit shapes are the ones Delta writes (checked against a real replace_rows commit in
tests/jobs/test_policy_scores.py::test_stale_plans_are_refused).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from libs.io.tables import scoped_version

CREATE = [{"commitInfo": {"operation": "CREATE TABLE", "operationParameters": {"partitionBy": '["trace_id"]'}}},
          {"metaData": {"id": "x"}}, {"protocol": {"minReaderVersion": 1}}]


def replace(predicate: str, trace: str) -> list[dict]:
    return [{"commitInfo": {"operation": "WRITE",
                            "operationParameters": {"mode": "Overwrite", "predicate": predicate}}},
            {"remove": {"path": f"trace_id={trace}/a.parquet", "dataChange": True,
                        "partitionValues": {"trace_id": trace}}},
            {"add": {"path": f"trace_id={trace}/b.parquet", "dataChange": True,
                     "partitionValues": {"trace_id": trace}}}]


def append(trace: str) -> list[dict]:
    return [{"commitInfo": {"operation": "WRITE", "operationParameters": {"mode": "Append"}}},
            {"add": {"path": f"trace_id={trace}/c.parquet", "dataChange": True,
                     "partitionValues": {"trace_id": trace}}}]


OPTIMIZE = [{"commitInfo": {"operation": "OPTIMIZE", "operationParameters": {}}},
            {"remove": {"path": "trace_id=a/b.parquet", "dataChange": False, "partitionValues": {"trace_id": "a"}}},
            {"add": {"path": "trace_id=a/d.parquet", "dataChange": False, "partitionValues": {"trace_id": "a"}}}]
UNPARTITIONED_DELETE = [{"commitInfo": {"operation": "DELETE", "operationParameters": {"predicate": '["x > 1"]'}}},
                        {"remove": {"path": "e.parquet", "dataChange": True, "partitionValues": {}}}]


def write_log(warehouse: Path, commits: list[list[dict]], *, first: int = 0) -> None:
    log = warehouse / "t" / "_delta_log"
    log.mkdir(parents=True)
    for version, actions in enumerate(commits, start=first):
        (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


def test_only_commits_that_change_the_scope_count(tmp_path):
    write_log(tmp_path, [CREATE,                                                  # 0: creation counts
                         replace("trace_id = 'a'", "a"),                         # 1: a's rows
                         replace("trace_id = 'b'", "b"),                         # 2: another trace's
                         append("b"),                                            # 3: appends to b's partition
                         OPTIMIZE,                                               # 4: no row changes
                         replace("trace_id = 'a' AND window_id = 'w2'", "a")])   # 5: a's other window
    assert scoped_version(tmp_path, "t", {"trace_id": "a"}) == 5
    assert scoped_version(tmp_path, "t", {"trace_id": "a", "window_id": "w1"}) == 1
    assert scoped_version(tmp_path, "t", {"trace_id": "b"}) == 3
    assert scoped_version(tmp_path, "t", {"trace_id": "c"}) == 0
    assert scoped_version(tmp_path, "t", {"trace_id": "a", "window_id": "w1"}, since=2) == 2   # nothing after 2
    assert scoped_version(tmp_path, "t", {"trace_id": "a"}, since=2) == 5
    assert scoped_version(tmp_path, "missing", {"trace_id": "a"}) is None
    assert scoped_version(tmp_path, "t", {"trace_id": "a"}, since=9) is None        # recreated: now at 5


@pytest.mark.parametrize(("commit", "changes_a"), [
    (UNPARTITIONED_DELETE, True),                              # a file without partition values: may hold a's rows
    # A predicate other than equalities: judged by the partitions of the files it added and removed.
    (replace("trace_id = 'a' OR trace_id = 'b'", "a"), True),
    (replace("trace_id = 'a' OR trace_id = 'b'", "b"), False),
    (replace("(trace_id = 'b')", "b"), False),                 # Delta may parenthesize the predicate
    (replace("n = 3 AND trace_id = 'b'", "b"), False),
    ([{"commitInfo": {"operation": "SET TBLPROPERTIES"}}, {"metaData": {"id": "x"}}], True),
])
def test_commit_kinds(tmp_path, commit, changes_a):
    write_log(tmp_path, [CREATE, replace("trace_id = 'a'", "a"), commit])
    assert scoped_version(tmp_path, "t", {"trace_id": "a"}) == (2 if changes_a else 1)


def test_a_cleaned_up_history_counts_as_changed(tmp_path):
    # Log retention removed commits 0-2 (a checkpoint holds the state): nothing can be said about 1-2.
    write_log(tmp_path, [replace("trace_id = 'b'", "b"), replace("trace_id = 'b'", "b")], first=3)
    assert scoped_version(tmp_path, "t", {"trace_id": "a"}, since=1) == 4
    assert scoped_version(tmp_path, "t", {"trace_id": "a"}, since=3) == 3
