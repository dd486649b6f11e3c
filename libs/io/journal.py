"""Commits to several Delta tables that every later reader sees whole or not at all: an intent journal rolled forward.

Delta commits one table at a time; an ingest replaces a trace's rows in `requests`, `rejected_records` and `traces`.
commit() makes those replaces one decision:
1. every table's files are written first, uncommitted (libs.io.delta_files.PendingWrite): invisible to readers;
2. the journal entry <warehouse>/_journal/<id>.json names each step (table, replace predicate, files) and is
   written atomically (a local rename after fsync; an object store's single PUT). Its existence is the decision:
   before it, a failure deletes the files and the tables keep the old rows; after it, the steps will be made;
3. each step is one replace commit that also records the application transaction `blockheat.journal:<id>`, so a
   step that is already in its table is never made twice;
4. the entry is deleted.

finish() rolls forward every entry a killed or failed writer left (a full disk, a lost JVM): every blockheat
command and Spark session on the warehouse calls it before reading, so a reader that starts after a writer stopped
sees the complete old rows or the complete new ones, never a mix. An entry that cannot be finished (the disk still
full) makes the reader refuse with the cause, rather than read a half-made change. On a local file system the
entry is locked while a process applies it (flock): a reader waits for a live writer's commits rather than racing
it. On an object store the application transaction keeps two finishing processes from making a step twice.

An ingest commits under its trace's lease (libs.io.lease): the entry records the lease's token, the writer checks
before the decision and each step that no later writer took the lease over (LeaseLost otherwise), and finish()
applies such an entry only when its writer no longer holds the lease and no later writer of the trace decided its
own change (then the entry is dropped: applying it would go over that change).

A server's statements wait while an entry is there (the SQL guard's CommitBarrier, on the directory()); the server
finishes a stopped writer's entry within a second (jobs.sql_server). What this does not cover: a reader already
running while the steps are being made (a served query that started before them) can see the tables between two
steps, as with any sequence of Delta commits.
"""
from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from blockheat.libs.io import storage
from blockheat.libs.io.lease import Lease, LeaseLost, current_lease

if TYPE_CHECKING:
    from blockheat.libs.io.delta_files import PendingWrite, TableTarget, Where

log = logging.getLogger(__name__)

Location = Path | str

DIRECTORY = "_journal"
#: The application transaction a step's commit records (with the entry's id).
TXN_PREFIX = "blockheat.journal:"
#: An entry's temporary file older than this is a writer that died before deciding: deleted.
STALE_TEMPORARY_S = 24 * 3600
# delta-rs and the Delta file helpers load only when there is an entry: a warehouse without one (the common case)
# costs every command one directory check.


class _Stopped(RuntimeError):
    """A decided commit not finished: `situation` says so, the message adds the cause."""

    def __init__(self, situation: str, cause: BaseException) -> None:
        super().__init__(f"{situation}: {type(cause).__name__}: {cause}")
        self.situation = situation


class JournalError(_Stopped):
    """A decided multi-table commit could not be finished; the tables must not be read until it is."""


class CommitPending(_Stopped):
    """The commit was decided (its journal entry written) but not every step was made; the next blockheat command
    on the warehouse finishes it."""


@dataclass(frozen=True)
class Step:
    """One table's replace (or append): the target (with the write id in its files' names), the predicate (or the
    Append) and the files."""

    target: TableTarget
    where: Where
    files: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        from blockheat.libs.io.delta_files import Append

        t = self.target
        where = {"append": self.where.to_json()} if isinstance(self.where, Append) else {"where": dict(self.where)}
        return {"table": t.name, "root": t.root, "schema": base64.b64encode(t.schema.serialize().to_pybytes()).decode(),
                "partition_columns": list(t.partition_columns), "stats_columns": list(t.stats_columns),
                "write_id": t.write_id, **where, "files": self.files}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Step:
        from blockheat.libs.io.delta_files import Append, TableTarget

        schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(d["schema"])))
        target = TableTarget(d["table"], d["root"], schema, tuple(d["partition_columns"]),
                             tuple(d["stats_columns"]), d["write_id"])
        where = Append.from_json(d["append"]) if "append" in d else dict(d["where"])
        return cls(target, where, list(d["files"]))


def directory(warehouse: Location) -> str:
    """Where a warehouse's journal entries are."""
    return storage.join(storage.normalize(warehouse), DIRECTORY)


def commit(warehouse: Location, writes: Sequence[PendingWrite], label: str, *,
           lease: Lease | None = None) -> dict[str, int]:
    """Commit every table of `writes` (each PendingWrite's tables in its order) as one decision. Before the decision
    a failure discards the files and raises it; after it, a failure raises CommitPending (the steps are finished
    by the next reader). Returns table -> new version.

    With the trace's `lease` (libs.io.lease) the writer checks it still holds it before the decision and before
    each step, and the entry records it: LeaseLost (nothing more committed) when another writer took it over."""
    steps = [Step(target, where, w.table_files(name))
             for w in writes for name, (target, where) in w.replaces.items()]
    entry = {"id": uuid.uuid4().hex, "label": label, "written_at": dt.datetime.now(dt.UTC).isoformat(),
             "steps": [s.to_json() for s in steps]}
    if lease is not None:
        entry["lease"] = {"trace": lease.trace, "owner": lease.record.owner, "token": lease.token}
    path = storage.join(directory(warehouse), f"{entry['id']}.json")
    try:
        if lease is not None:
            lease.mark_decided()
        lock = _write_entry(path, json.dumps(entry).encode())
    except BaseException:
        for w in writes:
            w.discard()
        raise
    for w in writes:
        w.done = True                     # the files belong to the journal now
    with lock:
        try:
            versions = _apply(entry, before_step=lease.check if lease is not None else None)
            if lease is not None:
                lease.check()             # stopped past its lease in the last step: not reported as made
        except LeaseLost:
            raise
        except Exception as exc:
            raise CommitPending(f"{label} is decided but not finished; the next blockheat command on {warehouse} "
                                "finishes it", exc) from exc
        _done(path, steps)
    return versions


def finish(warehouse: Location, *, holder: Lease | None = None) -> list[str]:
    """Finish every decided commit a stopped writer left in the warehouse (waiting for a live one); the labels of
    those this call finished. JournalError when one cannot be finished.

    An entry made under a trace's lease (libs.io.lease) is applied only when its writer no longer holds it (dead,
    or stopped past its expiry) and no later writer of the trace has decided its own change; one a later writer
    superseded is dropped, one whose trace's later holder has not decided yet is left to that holder (`holder`: the
    caller's own lease, whose entries of older leases this call applies before the caller commits)."""
    folder = directory(warehouse)
    if storage.is_local(folder) and not os.path.isdir(folder):
        return []                         # the common case, without touching pyarrow's file system
    finished = []
    for path, _, mtime_ms in sorted(storage.file_infos(folder)):
        name = storage.name(path)
        if name.endswith(".tmp"):
            if time.time() - mtime_ms / 1000 > STALE_TEMPORARY_S:
                storage.delete(path)      # a writer that died before deciding
            continue
        if not name.endswith(".json"):
            continue
        try:
            entry = json.loads(storage.read_bytes(path))
        except FileNotFoundError:
            continue
        except ValueError as exc:
            raise JournalError(f"{path}: unreadable journal entry", exc) from exc
        live = (lambda e=entry: _writer_live(warehouse, e)) if "lease" in entry else None
        with _locked(path, live) as present:
            if not present:
                continue                  # its writer finished it while this one waited
            verdict = _verdict(warehouse, entry, holder)
            steps = [Step.from_json(s) for s in entry["steps"]]
            if verdict == "leave":
                continue
            if verdict == "drop":
                log.warning("%s: a later ingest of the trace superseded it before it was finished; dropped (journal "
                            "entry %s)", entry["label"], path)
                _done(path, [Step(s.target, s.where, []) for s in steps])
                continue
            try:
                _apply(entry, recovering=True)
            except _Abandoned as exc:
                log.warning("%s: %s; the tables keep their rows as they were", entry["label"], exc)
                _done(path, [Step(s.target, s.where, []) for s in steps])      # every file of the write
                continue
            except Exception as exc:
                raise JournalError(
                    f"{entry['label']} is decided but not finished, and finishing it failed; nothing is read until "
                    f"it is: remove the cause and the next blockheat command finishes it (journal entry {path})",
                    exc) from exc
            _done(path, steps)
            log.info("finished %s, which its writer left unfinished", entry["label"])
            finished.append(entry["label"])
    return finished


def _writer_live(warehouse: Location, entry: dict[str, Any]) -> bool:
    """Whether the entry's writer still holds the lease it was made under (then it finishes the entry itself)."""
    made = entry.get("lease")
    if made is None:
        return False
    now = current_lease(warehouse, made["trace"])
    return now is not None and now.token == made["token"] and now.live()


def _verdict(warehouse: Location, entry: dict[str, Any], holder: Lease | None) -> str:
    """What recovery does with a left entry: "apply", "drop" (a later writer of the trace decided its own change:
    applying this one would go over it) or "leave" (a later writer holds the trace and has not decided yet: it
    applies the entry itself before its own change)."""
    made = entry.get("lease")
    if made is None:
        return "apply"
    if holder is not None and holder.trace == made["trace"] and holder.token >= made["token"]:
        return "drop" if holder.record.decided else "apply"
    now = current_lease(warehouse, made["trace"])
    if now is None or now.token <= made["token"]:
        return "apply"
    if now.decided:
        return "drop"
    return "leave" if now.live() else "apply"


def pending(warehouse: Location) -> list[str]:
    """The journal entries waiting to be finished."""
    folder = directory(warehouse)
    if storage.is_local(folder) and not os.path.isdir(folder):
        return []
    return sorted(p for p, _, _ in storage.file_infos(folder) if p.endswith(".json"))


class _Abandoned(Exception):
    """No step was made and a file the entry names is gone: the entry is dropped (the old rows stay)."""


def _apply(entry: dict[str, Any], *, recovering: bool = False,
           before_step: Callable[[], None] | None = None) -> dict[str, int]:
    from blockheat.libs.io import delta_log
    from blockheat.libs.io.delta_files import commit_replace

    txn = TXN_PREFIX + entry["id"]
    steps = [Step.from_json(s) for s in entry["steps"]]
    made = [delta_log.has_transaction(s.target.root, txn) for s in steps] if recovering else [False] * len(steps)
    if recovering:
        missing = [delta_log.file_path(s.target.root, f["path"]) for s, m in zip(steps, made, strict=True) if not m
                   for f in s.files if not storage.exists(delta_log.file_path(s.target.root, f["path"]))]
        if missing and not any(made):
            raise _Abandoned(f"{len(missing)} written file(s) are gone (first: {missing[0]})")
        if missing:
            raise FileNotFoundError(f"{len(missing)} written file(s) of a step not yet made are gone "
                                    f"(first: {missing[0]})")
    versions = {}
    for s in steps:
        if before_step is not None:
            before_step()
        versions[s.target.name] = commit_replace(None, s.target, s.where, s.files, txn=txn)
    return versions


def _done(path: str, steps: Sequence[Step]) -> None:
    """After the last step: drop the entry, then the files of failed task attempts (named with a write id, in no
    step)."""
    from blockheat.libs.io.delta_files import discard

    storage.delete(path)
    for s in steps:
        with contextlib.suppress(OSError):
            discard(s.target, keep=s.files)


class _Lock:
    """An exclusive flock on a local entry (released at close or when the process dies); a no-op elsewhere."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd

    def __enter__(self) -> _Lock:
        return self

    def __exit__(self, *_: object) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _write_entry(path: str, data: bytes) -> _Lock:
    """Write the entry atomically and return its lock, held from before the entry is visible."""
    if not storage.is_local(path):
        storage.write_bytes(path, data)   # an object store's PUT is atomic
        return _Lock(None)
    import fcntl

    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        os.rename(temporary, path)
        storage.fsync_directory(os.path.dirname(path))
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return _Lock(fd)


@contextlib.contextmanager
def _locked(path: str, writer_live: Callable[[], bool] | None) -> Iterator[bool]:
    """Hold the entry's lock (waiting for a live writer); yields whether the entry is still there. With
    `writer_live` (an entry made under a lease, libs.io.lease) a writer that holds the lock but no longer its lease
    (stopped past expiry) is not waited for: the steps' application transactions keep a step from being made twice.
    An object store has no lock: a live writer is waited for by polling its lease."""
    if not storage.is_local(path):
        while writer_live is not None and storage.exists(path) and writer_live():
            time.sleep(0.2)
        yield storage.exists(path)
        return
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        yield False
        return
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if writer_live is None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    break
                if not writer_live():
                    break
                time.sleep(0.2)
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        yield same
    finally:
        os.close(fd)


__all__ = ["CommitPending", "JournalError", "commit", "directory", "finish", "pending"]
