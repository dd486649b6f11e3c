"""A Delta table's current files from its transaction log, read here without Spark; and a new, empty
table's first commit, written here without Spark.

A job's first Delta read through Spark is slow on a fresh driver (the log's state rebuilt by Spark jobs,
the reader's classes loaded and compiled) even for the one-row `traces` table; reading the log is
cheap. Only the plain cases this project writes are read here: a single-file Parquet checkpoint (or
none) and JSON commits, no deletion vectors, no column mapping. Anything else raises LogUnreadable and the
caller reads through Spark.

Creating a table through Delta (DeltaTable.createIfNotExists) is slow on a fresh driver too, once per table a
job creates on a new warehouse; create_table writes the same version 0 (the commit's commitInfo, metaData and
protocol actions, and its checksum file) directly.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow.parquet as pq

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
# Reader features that leave a file's rows as they are in the file (deletion vectors: only while no file has
# one, checked per file); a table with any other is left to Spark.
_PLAIN_READER_FEATURES = frozenset({"timestampNtz", "vacuumProtocolCheck", "deletionVectors"})


class LogUnreadable(Exception):
    """The log has something this reader does not handle (the caller falls back to Spark)."""


@dataclass(frozen=True)
class Snapshot:
    """A version of a table: its files' add actions (as in the log: path relative and URL-encoded,
    partitionValues, size, stats) and its metadata action."""

    root: str
    version: int
    files: tuple[dict[str, Any], ...]
    metadata: dict[str, Any]

    def path(self, add: dict[str, Any]) -> str:
        return file_path(self.root, add["path"])


def file_path(root: str, relative_uri: str) -> str:
    """The local path of a file the log names by a URI relative to the table's root (URL-encoded)."""
    return os.path.join(root, *unquote(relative_uri).split("/"))


def commit_versions(log_dir: str | os.PathLike[str]) -> list[int]:
    """The versions of the commits (<version, 20 digits>.json) in a table's _delta_log, in order."""
    return sorted(int(m.group(1)) for n in os.listdir(log_dir) if (m := _COMMIT.match(n)))


def _key(action: dict[str, Any]) -> tuple[str, str | None]:
    """A logical file: its path and its deletion vector's id (a commit adding a deletion vector to a file
    removes the file without it and adds it with it)."""
    dv = action.get("deletionVector")
    return action["path"], None if not dv else f"{dv['storageType']}{dv['pathOrInlineDv']}@{dv.get('offset')}"


def _check(protocol: dict[str, Any] | None, metadata: dict[str, Any] | None, where: str) -> None:
    if protocol is not None:
        features = set(protocol.get("readerFeatures") or ())
        if protocol.get("minReaderVersion", 1) > 3 or features - _PLAIN_READER_FEATURES:
            raise LogUnreadable(f"{where}: reader protocol {protocol}")
        # Commits a coordinator or catalog owns may sit in _staged_commits before they reach the log.
        if any("coordinated" in f.lower() or "catalog" in f.lower() for f in protocol.get("writerFeatures") or ()):
            raise LogUnreadable(f"{where}: commits owned by a coordinator or catalog ({protocol})")
    if metadata is not None:
        mode = (metadata.get("configuration") or {}).get("delta.columnMapping.mode", "none")
        if mode != "none":
            raise LogUnreadable(f"{where}: column mapping mode {mode}")


def _checkpoint_actions(path: str) -> tuple[dict[tuple[str, str | None], dict[str, Any]], dict | None, dict | None]:
    """The add, protocol and metadata actions of a single-file (classic) checkpoint."""
    table = pq.read_table(path)
    if "sidecar" in table.column_names or "checkpointMetadata" in table.column_names:
        raise LogUnreadable(f"{path}: a V2 checkpoint")
    files: dict[tuple[str, str | None], dict[str, Any]] = {}
    protocol = metadata = None
    columns = [c for c in ("add", "protocol", "metaData") if c in table.column_names]
    for row in table.select(columns).to_pylist():
        if row.get("add"):
            add = row["add"]
            add["partitionValues"] = dict(add.get("partitionValues") or ())
            add["tags"] = dict(add.get("tags") or ()) or None
            files[_key(add)] = add
        elif row.get("protocol"):
            protocol = row["protocol"]
        elif row.get("metaData"):
            metadata = row["metaData"]
            metadata["configuration"] = dict(metadata.get("configuration") or ())
    return files, protocol, metadata


def snapshot(root: str | os.PathLike[str], version: int | None = None) -> Snapshot:
    """The table's files at `version` (default: the latest commit), replayed from the newest checkpoint at or
    below it and the JSON commits after that."""
    root = os.fspath(root)
    log_dir = os.path.join(root, "_delta_log")
    try:
        names = os.listdir(log_dir)
    except FileNotFoundError:
        raise LogUnreadable(f"{root}: no Delta log") from None
    commits = commit_versions(log_dir)
    if not commits:
        raise LogUnreadable(f"{log_dir}: no commits")
    target = commits[-1] if version is None else version
    if target not in commits:
        raise LogUnreadable(f"{log_dir}: no commit {target}")
    if any(n.endswith(".checkpoint.parquet") and not _CHECKPOINT.match(n) for n in names):
        raise LogUnreadable(f"{log_dir}: a multi-part or V2 checkpoint")
    checkpoints = [v for n in names if (m := _CHECKPOINT.match(n)) and (v := int(m.group(1))) <= target]
    start = max(checkpoints, default=-1)
    files: dict[tuple[str, str | None], dict[str, Any]] = {}
    protocol = metadata = None
    if start >= 0:
        files, protocol, metadata = _checkpoint_actions(os.path.join(log_dir, f"{start:020d}.checkpoint.parquet"))
    wanted = range(start + 1, target + 1)
    if set(wanted) - set(commits):
        raise LogUnreadable(f"{log_dir}: commits missing between {start + 1} and {target}")
    for v in wanted:
        with open(os.path.join(log_dir, f"{v:020d}.json"), encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                action = json.loads(line)
                if "add" in action:
                    files[_key(action["add"])] = action["add"]
                elif "remove" in action:
                    files.pop(_key(action["remove"]), None)
                elif "protocol" in action:
                    protocol = action["protocol"]
                elif "metaData" in action:
                    metadata = action["metaData"]
    _check(protocol, metadata, log_dir)
    if metadata is None:
        raise LogUnreadable(f"{log_dir}: no metadata action")
    for add in files.values():
        if add.get("deletionVector"):
            raise LogUnreadable(f"{log_dir}: file {add['path']} has a deletion vector")
    return Snapshot(root, target, tuple(files.values()), metadata)


#: The protocol Delta 4.4 gives a new table with no table features asked for (what create_table writes).
PLAIN_PROTOCOL = {"minReaderVersion": 1, "minWriterVersion": 2}
_M = 1 << 20
#: The bins of the file-size histogram Delta keeps in a checksum (its defaults: 0, 8 KiB to 4 MiB doubling, then
#: steps of 4, 8, 4, 16, 64, 128 and 256 MiB up to 4 GiB, then doubling to 256 GiB); a test compares a
#: checksum written here with one Delta wrote.
HISTOGRAM_BINS = ([0] + [8192 << k for k in range(10)] + list(range(8 * _M, 40 * _M + 1, 4 * _M))
                  + list(range(48 * _M, 120 * _M + 1, 8 * _M)) + list(range(124 * _M, 144 * _M + 1, 4 * _M))
                  + list(range(160 * _M, 576 * _M + 1, 16 * _M)) + list(range(640 * _M, 1408 * _M + 1, 64 * _M))
                  + list(range(1536 * _M, 2048 * _M + 1, 128 * _M)) + list(range(2304 * _M, 4096 * _M + 1, 256 * _M))
                  + [(8 << k) << 30 for k in range(6)])


def _compact(value: Any) -> str:
    """JSON as Delta writes it (no spaces)."""
    return json.dumps(value, separators=(",", ":"))


def _put_if_absent(path: str, text: str) -> bool:
    """Write `path` whole or not at all, and only if it does not exist (a temporary file linked to the name:
    the put-if-absent Delta's commits need); False when it already existed."""
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        return True
    finally:
        os.unlink(tmp)


def create_table(root: str | os.PathLike[str], schema_json: str, partition_columns: Sequence[str],
                 configuration: Mapping[str, str], engine: str = "blockheat") -> bool:
    """Create an empty Delta table at `root` as Delta's CREATE TABLE does: version 0 holds a commitInfo, the
    metaData (a new id, `schema_json` in Spark's StructType JSON, the partition columns, the table properties)
    and PLAIN_PROTOCOL, and its checksum file lists no files (so the first commit after it writes its own
    checksum from this one, without rebuilding the table's state). False, writing nothing, when version 0
    already exists (another writer created the table first). Local filesystems only."""
    log_dir = os.path.join(os.fspath(root), "_delta_log")
    os.makedirs(log_dir, exist_ok=True)
    commit = os.path.join(log_dir, f"{0:020d}.json")
    if os.path.exists(commit):
        return False
    now_ms = int(time.time() * 1000)
    txn = str(uuid.uuid4())
    metadata = {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                "schemaString": schema_json, "partitionColumns": list(partition_columns),
                "configuration": dict(configuration), "createdTime": now_ms}
    info = {"timestamp": now_ms, "operation": "CREATE TABLE",
            "operationParameters": {"partitionBy": _compact(list(partition_columns)), "clusterBy": "[]",
                                    "description": None, "isManaged": "false",
                                    "properties": _compact(dict(configuration))},
            "isolationLevel": "Serializable", "isBlindAppend": True, "operationMetrics": {},
            "engineInfo": engine, "txnId": txn}
    lines = [{"commitInfo": info}, {"metaData": metadata}, {"protocol": PLAIN_PROTOCOL}]
    if not _put_if_absent(commit, "".join(_compact(a) + "\n" for a in lines)):
        return False
    checksum = {"txnId": txn, "tableSizeBytes": 0, "numFiles": 0, "numMetadata": 1, "numProtocol": 1,
                "setTransactions": [], "domainMetadata": [], "metadata": metadata, "protocol": PLAIN_PROTOCOL,
                "fileSizeHistogram": {"sortedBinBoundaries": HISTOGRAM_BINS, "fileCounts": [0] * len(HISTOGRAM_BINS),
                                      "totalBytes": [0] * len(HISTOGRAM_BINS)},
                "allFiles": []}
    _put_if_absent(os.path.join(log_dir, f"{0:020d}.crc"), _compact(checksum))
    return True
