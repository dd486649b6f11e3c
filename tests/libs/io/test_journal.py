"""libs.io.journal without Spark: two tables committed as one decision, finished by the next reader when the writer
stopped between them, never made twice, and dropped when nothing was made and its files are gone."""
from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pytest

from blockheat.libs.io import delta_log, journal
from blockheat.libs.io.delta_files import TableTarget, write_from_driver

SCHEMA = pa.schema([pa.field("trace_id", pa.string()), pa.field("n", pa.int64())])


def target(warehouse: Path, name: str) -> TableTarget:
    root = str(warehouse / name)
    delta_log.create_table(root, SCHEMA, ["trace_id"], {})
    return TableTarget(name, root, SCHEMA, ("trace_id",), ("n",))


def pending(t: TableTarget, *values: int):
    return write_from_driver(t, {"trace_id": "x"}, pa.table({"n": pa.array(values, pa.int64())}))


def rows(t: TableTarget) -> list[int]:
    return sorted(delta_log.read(t.root, ["n"], {"trace_id": "x"}).column("n").to_pylist())


@pytest.fixture
def tables(tmp_path: Path) -> tuple[Path, TableTarget, TableTarget]:
    a, b = target(tmp_path, "a"), target(tmp_path, "b")
    journal.commit(tmp_path, [pending(a, 1), pending(b, 1, 1)], "the first write")
    return tmp_path, a, b


def test_two_tables_commit_as_one_and_leave_no_entry(tables):
    warehouse, a, b = tables
    versions = journal.commit(warehouse, [pending(a, 2), pending(b, 2, 2)], "the second write")
    assert (rows(a), rows(b), versions) == ([2], [2, 2], {"a": 2, "b": 2})
    assert journal.pending(warehouse) == []
    assert journal.finish(warehouse) == []


def test_a_writer_stopped_after_the_first_step_is_finished_by_the_next_reader(tables, monkeypatch):
    warehouse, a, b = tables
    real, made = delta_log.commit, []

    def first_only(*args, **kwargs):
        if made:
            raise OSError(28, "No space left on device")
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(delta_log, "commit", first_only)
    with pytest.raises(journal.CommitPending, match=r"the second write is decided but not finished.*No space left"):
        journal.commit(warehouse, [pending(a, 3), pending(b, 3, 3)], "the second write")
    assert (rows(a), rows(b)) == ([3], [1, 1])             # between the steps: what no reader may see
    monkeypatch.setattr(delta_log, "commit", real)
    assert journal.finish(warehouse) == ["the second write"]
    assert (rows(a), rows(b)) == ([3], [3, 3])
    assert delta_log.table_version(a.root) == 2            # the step already made is not made again
    assert journal.pending(warehouse) == []
    assert journal.finish(warehouse) == []


def test_a_finish_that_fails_again_refuses_and_keeps_the_entry(tables, monkeypatch):
    warehouse, a, b = tables
    monkeypatch.setattr(delta_log, "commit", lambda *a, **k: (_ for _ in ()).throw(OSError(28, "No space left")))
    with pytest.raises(journal.CommitPending):
        journal.commit(warehouse, [pending(a, 4), pending(b, 4)], "the third write")
    with pytest.raises(journal.JournalError, match="the third write is decided but not finished, and finishing it "
                                                   "failed; nothing is read until it is"):
        journal.finish(warehouse)
    assert len(journal.pending(warehouse)) == 1
    assert (rows(a), rows(b)) == ([1], [1, 1])


def test_an_entry_whose_files_are_gone_before_any_step_is_dropped(tables, monkeypatch, caplog):
    warehouse, a, b = tables
    writes = [pending(a, 5), pending(b, 5)]
    monkeypatch.setattr(journal, "_apply", lambda entry, **_: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):                  # stopped after the decision, before any step
        journal.commit(warehouse, writes, "the fourth write")
    monkeypatch.undo()
    (gone,) = writes[0].table_files("a")
    Path(delta_log.file_path(a.root, gone["path"])).unlink()
    (left,) = writes[1].table_files("b")
    with caplog.at_level(logging.WARNING, logger="blockheat.libs.io.journal"):
        assert journal.finish(warehouse) == []
    assert "the fourth write: 1 written file(s) are gone" in caplog.text
    assert journal.pending(warehouse) == []
    assert (rows(a), rows(b)) == ([1], [1, 1])
    assert not Path(delta_log.file_path(b.root, left["path"])).exists()     # the rest of the write is deleted
