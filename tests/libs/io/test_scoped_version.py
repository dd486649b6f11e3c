"""libs.io.table_versions.scoped_version on real tables written by delta-rs: which commits change a trace's (or
window's) rows. Replaces name their rows in their predicate (as libs.io.delta_files records it, and Spark's
replaceWhere); other commits are judged by the partitions of the files they add or remove."""
from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from blockheat.libs.io import delta_log
from blockheat.libs.io.table_versions import scoped_version

SCHEMA = pa.schema([("trace_id", pa.string()), ("window_id", pa.string()), ("x", pa.int64())])


class Table:
    """A table "t" under a warehouse, and the commits the tests make on it."""

    def __init__(self, warehouse: Path) -> None:
        self.root = str(warehouse / "t")
        DeltaTable.create(self.root, SCHEMA, partition_by=["trace_id"])                # version 0
        self.n = 0

    def _file(self, trace: str, rows: int = 2) -> dict:
        self.n += 1
        relative = f"trace_id={trace}/f{self.n}.parquet"
        os.makedirs(os.path.join(self.root, f"trace_id={trace}"), exist_ok=True)
        pq.write_table(pa.table({"window_id": ["w1"] * rows, "x": list(range(rows))}),
                       os.path.join(self.root, relative))
        return {"path": relative, "size": os.path.getsize(os.path.join(self.root, relative)), "rows": rows,
                "partition": f'{{"trace_id": "{trace}"}}', "stats": "{}"}

    def replace(self, predicate: str, trace: str) -> int:
        removes = [a for a in delta_log.snapshot(self.root).files if a["partitionValues"]["trace_id"] == trace]
        return delta_log.commit(self.root, [delta_log.add_action(self._file(trace), 0)], removes,
                                app_id=f"test:{trace}", info={delta_log.REPLACE_KEY: predicate})

    def append(self, trace: str) -> None:
        write_deltalake(self.root, pa.table({"trace_id": [trace], "window_id": ["w1"], "x": [1]}, schema=SCHEMA),
                        mode="append")


def test_only_commits_that_change_the_scope_count(tmp_path):
    t = Table(tmp_path)                                          # 0: creation counts
    assert t.replace("trace_id = 'a'", "a") == 1                 # 1: a's rows
    t.replace("trace_id = 'b'", "b")                             # 2: another trace's
    t.append("b")                                                # 3: appends to b's partition
    DeltaTable(t.root).optimize.compact()                        # 4: no row changes
    t.replace("trace_id = 'a' AND window_id = 'w2'", "a")        # 5: a's other window
    assert scoped_version(tmp_path, "t", {"trace_id": "a"}) == 5
    assert scoped_version(tmp_path, "t", {"trace_id": "a", "window_id": "w1"}) == 1
    assert scoped_version(tmp_path, "t", {"trace_id": "b"}) == 3      # compacting b's two files (4) changed no row
    assert DeltaTable(t.root).history()[1]["operation"] == "OPTIMIZE"
    assert scoped_version(tmp_path, "t", {"trace_id": "c"}) == 0
    assert scoped_version(tmp_path, "t", {"trace_id": "a", "window_id": "w1"}, since=2) == 2   # nothing after 2
    assert scoped_version(tmp_path, "t", {"trace_id": "a"}, since=2) == 5
    assert scoped_version(tmp_path, "missing", {"trace_id": "a"}) is None
    assert scoped_version(tmp_path, "t", {"trace_id": "a"}, since=9) is None        # recreated: now at 5


@pytest.mark.parametrize(("commit", "changes_a"), [
    ("delete a", True),                                          # a DELETE of a's rows: by its files' partitions
    ("delete b", False),
    ("append b", False),
    # A predicate other than equalities: judged by the partitions of the files it added and removed.
    ("replace trace_id = 'a' OR trace_id = 'b'|a", True),
    ("replace trace_id = 'a' OR trace_id = 'b'|b", False),
    ("replace (trace_id = 'b')|b", False),                       # Delta may parenthesize the predicate
    ("replace n = 3 AND trace_id = 'b'|b", False),
    ("properties", True),                                        # the table's properties changed
])
def test_commit_kinds(tmp_path, commit, changes_a):
    t = Table(tmp_path)
    t.replace("trace_id = 'b'", "b")
    t.replace("trace_id = 'a'", "a")                             # 2
    kind, _, rest = commit.partition(" ")
    if kind == "delete":
        DeltaTable(t.root).delete(f"trace_id = '{rest}'")
    elif kind == "append":
        t.append(rest)
    elif kind == "replace":
        predicate, trace = rest.split("|")
        t.replace(predicate, trace)
    else:
        DeltaTable(t.root).alter.set_table_properties({"delta.logRetentionDuration": "interval 30 days"})
    assert scoped_version(tmp_path, "t", {"trace_id": "a"}) == (3 if changes_a else 2)


def test_a_cleaned_up_history_counts_as_changed(tmp_path):
    # Log retention removed commits 0-2 (a checkpoint at 2 holds the state): nothing can be said about 1-2.
    t = Table(tmp_path)
    t.replace("trace_id = 'b'", "b")
    t.replace("trace_id = 'b'", "b")
    DeltaTable(t.root).create_checkpoint()
    t.replace("trace_id = 'b'", "b")
    t.replace("trace_id = 'b'", "b")                             # 4
    for version in range(3):
        os.unlink(os.path.join(t.root, "_delta_log", f"{version:020d}.json"))
    assert scoped_version(tmp_path, "t", {"trace_id": "a"}, since=1) == 4
    assert scoped_version(tmp_path, "t", {"trace_id": "a"}, since=3) == 3
