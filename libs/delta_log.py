"""A Delta table's current files from its transaction log, read here without Spark.

A job's first Delta read through Spark costs 10-14 s on a fresh driver (the log's state rebuilt by Spark jobs,
the reader's classes loaded and compiled) even for the one-row `traces` table; reading the log is
milliseconds. Only the plain cases this project writes are read here: a single-file Parquet checkpoint (or
none) and JSON commits, no deletion vectors, no column mapping. Anything else raises LogUnreadable and the
caller reads through Spark, as it always could.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any

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
    from urllib.parse import unquote

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
