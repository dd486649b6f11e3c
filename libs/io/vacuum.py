"""Warehouse clean-up: Delta's VACUUM of replaced versions, and the sweep of what no committed version references.

Two kinds of left-over files, removed by two rules:
- files of replaced versions (a re-ingest removes the trace's old files from the log but keeps them on disk, so
  time travel can read the old version): vacuum_table() deletes those removed more than a retention ago, with
  delta-rs's `DeltaTable.vacuum` (Delta's VACUUM; its default mode deletes only files the log removed, never a
  file the log does not name). After it, versions older than the retention can no longer be read.
- files no committed version references: a kill during a write leaves its Parquet files in the table's
  directory, never committed, and its decompressed inputs and scratch copy under <warehouse>/_staging.
  sweep_table() and sweep_staging() delete those older than LONGEST_WRITE: a file that young may still belong to
  a write in progress. delta-rs's full vacuum would also delete such orphans, but with the single retention of
  the replaced versions; the sweep keeps the two apart (orphans after a day, replaced versions after a week).

Tables may be local or on an object store (libs.io.storage).
"""
from __future__ import annotations

import datetime as dt
import math
import os
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from deltalake import DeltaTable

from blockheat.libs.io import journal, storage
from blockheat.libs.io.delta_files import ABANDONED_DIR
from blockheat.libs.io.delta_log import is_table

#: The longest a blockheat write may run, from its first file written to its commit (an ingest of the largest
#: trace, a nightly stage; each takes minutes to a few hours). A file no committed version references and older
#: than this is left over from a killed or failed write, never one still being written; the ingest's start-up
#: sweep and `blockheat vacuum` delete it. It is also the shortest safe retention of replaced versions: a job
#: reads the version it started on for at most this long.
LONGEST_WRITE = dt.timedelta(hours=24)
#: Delta's default retention of replaced versions' files (delta.deletedFileRetentionDuration: 7 days).
DEFAULT_RETAIN_HOURS = 168
#: The shortest retention vacuum_table() accepts without allow_short: LONGEST_WRITE, so no running job loses the
#: files of the version it reads.
MIN_RETAIN_HOURS = int(LONGEST_WRITE.total_seconds() // 3600)
STAGING_DIR = "_staging"
LOG_DIR = "_delta_log"


class RetentionError(ValueError):
    """A retention shorter than MIN_RETAIN_HOURS without the explicit allowance, or a negative one."""


@dataclass(frozen=True)
class Removed:
    """What a clean-up deleted in one place (a table, or the staging location): files and their bytes."""

    where: str
    files: int
    bytes: int


def blockheat_tables() -> tuple[str, ...]:
    """The names of the tables blockheat writes (schemas.TABLE_MODULES)."""
    from blockheat import schemas

    return tuple(schemas.TABLE_MODULES)


def check_retention(retain_hours: float, *, allow_short: bool = False) -> None:
    """RetentionError unless 0 <= retain_hours, and MIN_RETAIN_HOURS <= retain_hours unless allow_short."""
    if retain_hours < 0:
        raise RetentionError(f"retention must be >= 0 hours, got {retain_hours:g}")
    if retain_hours < MIN_RETAIN_HOURS and not allow_short:
        raise RetentionError(
            f"retention of {retain_hours:g} h is below the minimum of {MIN_RETAIN_HOURS} h (the longest a job may "
            f"read the version it started on); a job still reading an older version would lose its files; allow it "
            f"explicitly to go below")


def vacuum_table(root: str, retain_hours: float = DEFAULT_RETAIN_HOURS, *, allow_short: bool = False,
                 dry_run: bool = False) -> Removed:
    """Delta's VACUUM of the table at `root` through delta-rs: delete the files of replaced versions removed from
    the log more than `retain_hours` ago (after it, older versions can no longer be read). RetentionError below
    MIN_RETAIN_HOURS unless allow_short. Returns the files and bytes deleted (to be deleted, with dry_run)."""
    check_retention(retain_hours, allow_short=allow_short)
    table = DeltaTable(storage.delta_uri(root), storage_options=storage.delta_options(root))
    hours = math.ceil(retain_hours)         # delta-rs takes whole hours: round up, never deleting more than asked
    # Sizes from a listing before: delta-rs names the files it deletes relative to the table, escaped its own way;
    # every data file's name is unique (a write id or UUID in it), so the last part of the path finds it.
    sizes = {storage.name(location): size for location, size, _ in storage.file_infos(root)
             if f"/{LOG_DIR}/" not in location}
    # delta-rs lists every expired tombstone, also one whose file a previous vacuum deleted (and commits a VACUUM
    # START/END pair for it): only files still there count, and with none there nothing is run or committed.
    present = _present(sizes, table.vacuum(retention_hours=hours, dry_run=True, enforce_retention_duration=False))
    if present and not dry_run:
        present = _present(sizes, table.vacuum(retention_hours=hours, dry_run=False, enforce_retention_duration=False))
    return Removed(storage.name(root), len(present), sum(present.values()))


def _present(sizes: dict[str, int], paths: Iterable[str]) -> dict[str, int]:
    """The files among delta-rs's vacuum's `paths` that the listing before held: file name -> bytes."""
    found = {}
    for path in paths:
        last = path.rstrip("/").rsplit("/", 1)[-1]
        for name in (last, unquote(last)):
            if name in sizes:
                found[name] = sizes[name]
                break
    return found


def vacuum_warehouse(warehouse: str | os.PathLike[str], retain_hours: float = DEFAULT_RETAIN_HOURS, *,
                     allow_short: bool = False, tables: Iterable[str] | None = None) -> list[Removed]:
    """vacuum_table() of every blockheat table of the warehouse that exists (or of `tables`), in name order."""
    check_retention(retain_hours, allow_short=allow_short)
    base = storage.normalize(warehouse)
    done = []
    for name in sorted(tables if tables is not None else blockheat_tables()):
        root = storage.join(base, name)
        if is_table(root):
            done.append(vacuum_table(root, retain_hours, allow_short=allow_short))
    return done


def orphan_names(root: str, older_than: dt.timedelta = LONGEST_WRITE) -> set[str]:
    """The names of the table's files that the log names in no version it holds and that were last modified more
    than `older_than` ago (whole hours, rounded up): what delta-rs's full vacuum would delete (it lists files the
    log does not name by modification time) beyond what its default one would (files the log removed), both
    asked as dry runs."""
    table = DeltaTable(storage.delta_uri(root), storage_options=storage.delta_options(root))
    hours = math.ceil(older_than.total_seconds() / 3600)
    full = table.vacuum(retention_hours=hours, dry_run=True, enforce_retention_duration=False, full=True)
    removed = table.vacuum(retention_hours=hours, dry_run=True, enforce_retention_duration=False)
    return {unquote(p.rstrip("/").rsplit("/", 1)[-1]) for p in set(full) - set(removed)}


def _cutoff_ns(older_than: dt.timedelta, now: float | None) -> int:
    return int(((time.time() if now is None else now) - older_than.total_seconds()) * 1e9)


def sweep_table(root: str, older_than: dt.timedelta = LONGEST_WRITE) -> Removed:
    """Delete the Parquet files in the table's directory that no commit or checkpoint of its log names and that
    were last modified more than `older_than` ago (left by a killed write), and the markers of writes discarded
    that long ago (delta_files.ABANDONED_DIR; not counted). Nothing when `root` is no Delta table. Other files and
    directories whose names start with _ or . (the log among them) are never touched."""
    if not is_table(root):
        return Removed(storage.name(root), 0, 0)
    cutoff = _cutoff_ns(older_than, None)      # delta-rs judges the age by the same clock
    candidates = []
    prefix = root.rstrip("/") + "/"
    for location, size, mtime_ns in storage.file_infos(root):
        parts = location[len(prefix):].split("/") if location.startswith(prefix) else [storage.name(location)]
        if len(parts) == 2 and parts[0] == ABANDONED_DIR and mtime_ns < cutoff:
            storage.delete(location)
            continue
        if any(p.startswith(("_", ".")) for p in parts) or not parts[-1].endswith(".parquet"):
            continue
        if mtime_ns < cutoff:
            candidates.append((location, size))
    if not candidates:
        return Removed(storage.name(root), 0, 0)
    orphans = orphan_names(root, older_than)   # asked after the listing: a file committed meanwhile is named
    files = removed = 0
    for location, size in candidates:
        if unquote(storage.name(location)) in orphans and storage.delete(location):
            files += 1
            removed += size
    return Removed(storage.name(root), files, removed)


def sweep_staging(staging: str | os.PathLike[str], older_than: dt.timedelta = LONGEST_WRITE, *,
                  now: float | None = None) -> Removed:
    """Delete every ingest's folder under the staging location (decompressed inputs, scratch copies) whose newest
    file (an empty local folder: the folder itself) was modified more than `older_than` ago: an ingest removes its
    own folder when it ends, so an old one is left by a killed ingest."""
    cutoff = _cutoff_ns(older_than, now)
    location = storage.normalize(staging)
    files = removed = 0
    if storage.is_local(location):
        base = Path(location)
        if not base.is_dir():
            return Removed(STAGING_DIR, 0, 0)
        for entry in base.iterdir():
            contents = [(p, p.stat()) for p in entry.rglob("*") if p.is_file()] if entry.is_dir() else \
                [(entry, entry.stat())]
            newest = max([entry.stat().st_mtime_ns, *(s.st_mtime_ns for _, s in contents)])
            if newest >= cutoff:
                continue
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            files += len(contents)
            removed += sum(s.st_size for _, s in contents)
        return Removed(STAGING_DIR, files, removed)
    groups: dict[str, list[tuple[str, int, int]]] = {}
    prefix = location.rstrip("/") + "/"
    for path, size, mtime_ns in storage.file_infos(location):
        top = path[len(prefix):].split("/", 1)[0]
        groups.setdefault(top, []).append((path, size, mtime_ns))
    for group in groups.values():
        if max(m for _, _, m in group) >= cutoff:
            continue
        for path, size, _ in group:
            if storage.delete(path):
                files += 1
                removed += size
    return Removed(STAGING_DIR, files, removed)


def sweep_warehouse(warehouse: str | os.PathLike[str], older_than: dt.timedelta = LONGEST_WRITE, *,
                    tables: Iterable[str] | None = None, now: float | None = None) -> list[Removed]:
    """sweep_staging() of <warehouse>/_staging, then sweep_table() of every blockheat table (or of `tables`);
    `now` is the staging sweep's clock (the tables' is delta-rs's: the real one). The decided commits a stopped
    writer left are finished first (libs.io.journal): their files are named by no version yet."""
    journal.finish(warehouse)
    base = storage.normalize(warehouse)
    done = [sweep_staging(storage.join(base, STAGING_DIR), older_than, now=now)]
    for name in sorted(tables if tables is not None else blockheat_tables()):
        done.append(sweep_table(storage.join(base, name), older_than))
    return done


__all__ = [
    "DEFAULT_RETAIN_HOURS",
    "LONGEST_WRITE",
    "MIN_RETAIN_HOURS",
    "STAGING_DIR",
    "Removed",
    "RetentionError",
    "blockheat_tables",
    "check_retention",
    "orphan_names",
    "sweep_staging",
    "sweep_table",
    "sweep_warehouse",
    "vacuum_table",
    "vacuum_warehouse",
]
