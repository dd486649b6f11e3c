"""Where each table lives and its versions, from the Delta log through delta-rs, without Spark: table_path,
table_exists, table_version, and which version last changed given rows (scoped_version: the freshness test of
everything that records the table versions it read, a plan's inputs)."""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from blockheat.libs.io import delta_log, storage
from blockheat.libs.io.delta_log import sql_literal

__all__ = ["Location", "scoped_version", "table_exists", "table_path", "table_version"]

Location = str | os.PathLike[str]


def table_path(warehouse: Location, name: str) -> str:
    """Delta tables live at <warehouse>/<name> (a local path or a URI, libs.io.storage)."""
    return storage.join(storage.normalize(warehouse), name)


def table_exists(warehouse: Location, name: str) -> bool:
    """Whether table `name` exists under the warehouse."""
    return delta_log.is_table(table_path(warehouse, name))


def table_version(warehouse: Location, name: str) -> int | None:
    """The table's latest Delta version (None when the table does not exist): read with
    read_table(..., version=v) to see exactly that version; compare later to tell whether it changed."""
    return delta_log.table_version(table_path(warehouse, name))

_EQUALITY = re.compile(r"^\(?\s*(\w+)\s*=\s*('(?:[^']*)'|-?[\d.]+)\s*\)?$")


def _predicate_values(predicate: str) -> dict[str, str] | None:
    """column -> literal text of a replace predicate "a = 'x' AND b = 3" (as replace_rows writes them);
    None when it is anything else."""
    out = {}
    for term in re.split(r"\s+AND\s+", predicate.strip()):
        m = _EQUALITY.match(term.strip())
        if m is None:
            return None
        out[m.group(1)] = m.group(2)
    return out


#: Operations that rewrite files without changing any row.
_NO_ROW_CHANGE = frozenset({"OPTIMIZE", "VACUUM START", "VACUUM END", "FSCK"})


def _commit_touches(root: str, info: Mapping[str, Any], scope: Mapping[str, Any]) -> bool:
    """Whether one commit (its commitInfo in the table's history) may have changed rows where column = scope[column]
    for every scope column (conservative: True unless the commit shows it did not). A replace names its rows in its
    predicate; any other commit is judged by what it changed (delta_log.change): the partitions of the files it
    added or removed, and the schema and properties."""
    predicate = info.get(delta_log.REPLACE_KEY)
    if predicate is None and info.get("operation") == "WRITE":
        predicate = (info.get("operationParameters") or {}).get("predicate")   # Spark's replaceWhere
    if isinstance(predicate, str):
        values = _predicate_values(predicate)
        if values is not None:                           # a replace: it changed the rows it names
            return all(values[c] == sql_literal(v) for c, v in scope.items() if c in values)
    if info.get("operation") in _NO_ROW_CHANGE:
        return False
    changed = delta_log.change(root, int(info["version"]))
    if changed is None or changed.metadata:
        return True                                      # cannot tell, or the schema or properties changed
    return not all(any(c in f and f[c] != str(v) for c, v in scope.items()) for f in changed.partitions)


def scoped_version(warehouse: Location, name: str, scope: Mapping[str, Any], *,
                   since: int | None = None) -> int | None:
    """The latest version of table `name` whose commit may have changed the rows where column = value for
    each item of `scope` (e.g. {"trace_id": "hplajw"}): a commit that replaced other traces' rows does not
    count, one that changed the schema does. With `since`, the scan stops there: the answer is `since` when
    nothing in scope changed after it; when the log no longer holds every commit after `since` (log
    retention), it is the latest version (counted as changed). None when the table does not exist or was
    recreated (its latest version is older than `since`).

    From the table's history (delta-rs): replace commits name their rows in their predicate; other commits count
    unless every file they add or remove is in another partition of a scope column."""
    root = table_path(warehouse, name)
    latest = delta_log.table_version(root)
    if latest is None or (since is not None and latest < since):
        return None
    stop = -1 if since is None else since
    entries = {int(e["version"]): e for e in delta_log.history(root, latest - stop)}
    for version in range(latest, stop, -1):
        info = entries.get(version)
        if info is None:
            return latest                                # history cleaned up: cannot tell, so changed
        if version == 0 or _commit_touches(root, info, scope):
            return version
    return since
