"""What the incremental stages need to know about a trace's tables: the requests version and the trace's files they
start from, the time range of the requests files added or removed since a version, a table's files in some
partitions, integer columns' ranges from a Parquet footer, and their stored state documents. Reads the Delta logs,
footers and state documents only (no Spark); replaces a state's document."""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pyarrow.parquet as pq

from blockheat.libs.io import delta_log, storage
from blockheat.libs.io.delta_files import TableTarget
from blockheat.libs.io.tables import Location, table_path
from blockheat.libs.table_io.device_pass import row_groups
from blockheat.schemas import requests as RQ


def requests_state(warehouse: Location, trace_id: str) -> tuple[int, list[str]]:
    """The requests table's version now and the trace's files (SHA-256s in order, from `traces`)."""
    version = delta_log.table_version(table_path(warehouse, RQ.TABLE))
    (row,) = delta_log.read(table_path(warehouse, "traces"), ["source_files"], {"trace_id": trace_id}).to_pylist()
    return int(version or 0), [f["sha256"] for f in row["source_files"]]


def known_requests_state(warehouse: Location, trace_id: str) -> tuple[int, list[str]] | None:
    """requests_state, or None when the trace has no `traces` row (requests written without an ingest: no state
    is kept for them) or the requests log cannot be read."""
    try:
        return requests_state(warehouse, trace_id)
    except (delta_log.LogUnreadable, ValueError):
        return None


def changes_since(warehouse: Location, trace_id: str, sha256: Sequence[str], stored_sha256: Sequence[str],
                  version: int) -> tuple[int, int] | bool | None:
    """What changed since a state stored at requests `version` for the trace's files `stored_sha256`, the trace's
    files now being `sha256`: False when the state may not be resumed (the trace was ingested again, so its files
    do not extend the stored ones, or the log cannot tell), else changed_span (None: no requests file changed)."""
    if list(sha256[:len(stored_sha256)]) != list(stored_sha256):
        return False
    return changed_span(warehouse, trace_id, version)


def changed_span(warehouse: Location, trace_id: str, since: int) -> tuple[int, int] | bool | None:
    """The ts range of the trace's requests files added or removed after version `since` (inclusive); None when
    none; False when it cannot tell (the log or a removed file is gone)."""
    root = table_path(warehouse, RQ.TABLE)
    try:
        old, new = delta_log.snapshot(root, since), delta_log.snapshot(root)
    except delta_log.LogUnreadable:
        return False

    def mine(snap: delta_log.Snapshot) -> dict[str, str]:
        return {a["path"]: snap.path(a) for a in snap.files if a["partitionValues"]["trace_id"] == trace_id}

    before, now = mine(old), mine(new)
    changed = [now[p] for p in now.keys() - before.keys()] + [before[p] for p in before.keys() - now.keys()]
    if not changed:
        return None
    lo = hi = None
    for path in changed:
        if not storage.exists(path):
            return False
        for g in row_groups(path):
            lo, hi = (g.lo, g.hi) if lo is None else (min(lo, g.lo), max(hi, g.hi))
    return (lo, hi) if lo is not None else None


def footer_ranges(path: str, columns: Sequence[str]) -> dict[str, tuple[int, int]]:
    """(min, max) of integer columns over a Parquet file's row groups, from its footer."""
    fs, local = storage.filesystem(path)
    meta = pq.ParquetFile(local, filesystem=fs).metadata
    index = {meta.schema.column(i).name: i for i in range(meta.num_columns)}
    out: dict[str, tuple[int, int]] = {}
    for c in columns:
        lows, highs = [], []
        for g in range(meta.num_row_groups):
            st = meta.row_group(g).column(index[c]).statistics
            if st is None or not st.has_min_max:
                raise ValueError(f"{path}: no statistics for {c}")
            lows.append(int(st.min))
            highs.append(int(st.max))
        out[c] = (min(lows), max(highs)) if lows else (0, -1)
    return out


def stored_files(target: TableTarget, scope: Mapping[str, str]) -> list[tuple[dict[str, Any], str]]:
    """The table's files (add action, location) in the partitions `scope` names (partition text values)."""
    snap = delta_log.snapshot(target.root)
    return [(a, snap.path(a)) for a in snap.files
            if all(a["partitionValues"].get(c) == v for c, v in scope.items())]


def replace_state_doc(document: str, doc: dict[str, Any],
                      files: Callable[[dict[str, Any]], Iterable[str]] = lambda _: ()) -> dict[str, Any]:
    """Write a state's document, after the files it names were written (one PUT or rename: a reader sees the previous
    state or this one); then delete the previous document's files that this one does not name (`files`: a
    document's file names, relative to its folder). Returns the previous document ({} when there was none)."""
    previous = read_state_doc(document) or {}
    storage.write_bytes(document, json.dumps(doc).encode())
    folder = storage.parent(document)
    for name in set(files(previous)) - set(files(doc)):
        storage.delete(storage.join(folder, name))
    return previous


def read_state_doc(path: str) -> dict[str, Any] | None:
    """The JSON document (an object) at `path`, or None when it is missing or damaged."""
    if not storage.is_file(path):
        return None
    try:
        doc = json.loads(storage.read_bytes(path))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
