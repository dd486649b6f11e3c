"""System faults as one line that names the cause and the path: a full disk, a denied or read-only path, a Spark
JVM or Python worker that died or ran out of memory. Spark reports them wrapped (`An error occurred while calling
o191.parquet`, `An exception was thrown from the Python worker`) with the cause deep in a Java or Python stack;
fault_message finds the cause in the whole text of the error and its chain."""
from __future__ import annotations

import errno
import os
import re

# Where a wrapped Spark or Python error names the file it was writing or reading.
_PATH = re.compile(r"(?:AccessDeniedException|FileNotFoundException|FileSystemException): (/[^\s:(]+)"
                   r"|writing rows to (?:file:)?(/[^\s]+?)\.?\s"
                   r"|\[Errno \d+\] [^:\n]+: '([^']+)'"
                   r"|(?:file:)(/[^\s,;'\"]+)")
_DISK_FULL = re.compile(r"No space left on device|\[Errno 28\]|ENOSPC|Disk quota exceeded")
_DENIED = re.compile(r"Permission denied|AccessDeniedException|\[Errno 13\]|EACCES")
_READ_ONLY = re.compile(r"Read-only file system|\[Errno 30\]|EROFS")
_JVM_OOM = re.compile(r"java\.lang\.OutOfMemoryError: ([^\n]+)")
_WORKER_CRASH = re.compile(r"Python worker exited unexpectedly|PythonException[\s\S]*\bMemoryError\b")
_JVM_GONE = re.compile(r"Answer from Java side is empty|Java gateway process exited|Py4JNetworkError")
_SERVER_GONE = re.compile(r"StatusCode\.UNAVAILABLE")
_METASTORE = re.compile(r"Unable to instantiate org\.apache\.hadoop\.hive\.ql\.metadata\.SessionHiveMetaStoreClient")


def _text(exc: BaseException) -> str:
    """The messages of the exception and of every cause and context under it."""
    parts, seen, current = [], set(), exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(f"{type(current).__name__}: {current}")
        current = current.__cause__ or current.__context__
    return "\n".join(parts)


def _path(exc: BaseException, text: str) -> str | None:
    found = getattr(exc, "filename", None)
    if found:
        return str(found)
    match = _PATH.search(text)
    return next((g for g in match.groups() if g), None) if match else None


def fault_message(exc: BaseException, warehouse: str | None = None) -> str | None:
    """The one-line description of a system fault behind `exc`, or None when it is not one. The path is the one
    the error names, else `warehouse` (where a command writes)."""
    text = _text(exc)
    code = getattr(exc, "errno", None)
    path = _path(exc, text)
    where = f" ({path})" if path else f" (under the warehouse {warehouse})" if warehouse else ""
    if code == errno.ENOSPC or _DISK_FULL.search(text):
        return f"disk full: no space left on the device{where}; free space there and run the command again"
    if code == errno.EROFS or _READ_ONLY.search(text):
        return f"read-only file system{where}: the warehouse must be writable"
    if code == errno.EACCES or _DENIED.search(text):
        return f"permission denied{where}: this user may not write or read there"
    if oom := _JVM_OOM.search(text):
        return (f"the Spark JVM ran out of memory ({oom.group(1).strip()}): give it more "
                "(BLOCKHEAT_SPARK_MASTER with fewer cores, or spark.driver.memory, 4g by default)")
    if _WORKER_CRASH.search(text):
        return "a Python worker of Spark died (out of memory, or killed): run with --debug for the worker's error"
    if _JVM_GONE.search(text):
        return "the Spark JVM stopped answering (it exited: killed, or out of memory); run with --debug for its output"
    if _METASTORE.search(text):
        url = os.environ.get("BLOCKHEAT_METASTORE_URL")
        where = (f"the PostgreSQL metastore {url} (BLOCKHEAT_METASTORE_URL) did not answer or refused the login"
                 if url else "the warehouse's Derby metastore could not be opened")
        return f"the SQL catalog cannot start: {where}; run with --debug for the metastore's own errors"
    if _SERVER_GONE.search(text):
        return ("the Spark Connect server stopped answering (`blockheat serve` stopped?); BLOCKHEAT_SPARK_REMOTE=local "
                "runs the command on its own")
    return None


__all__ = ["fault_message"]
