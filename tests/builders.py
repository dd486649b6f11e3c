"""Test helpers: run an ingest and read back what it wrote."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from blockheat.jobs.ingest_trace import IngestSummary, run
from blockheat.libs.ingest.pipeline import IngestOptions, staging_location
from blockheat.libs.io.session import SparkConfig
from blockheat.schemas import requests as R


def ingest(spark: Any, cfg: SparkConfig, fmt: str, trace_id: str, paths: list[Any], **options: Any) -> IngestSummary:
    opts = IngestOptions(fmt, trace_id, tuple(str(p) for p in paths),
                         staging=staging_location(cfg.warehouse), **options)
    return run(spark, cfg, opts)


def _log_rows(spark: Any, table: str, trace_id: str) -> list[dict[str, Any]] | None:
    """One trace's rows of a table of the session's warehouse as `collect()` gives them, by libs.io.tables.trace_rows
    (the table's files as its log lists them; through Spark when the reader does not handle the log); None when
    the table does not exist. Not a Spark query: Spark's first read after a commit rebuilds the table's state,
    2-4 s a read-back here, and most tests of ingest read back what they just wrote. tests/libs/io/test_delta_log.py
    checks that reader's files equal Spark's at every version; the catalog, CLI and SQL tests keep querying
    through Spark SQL."""
    from blockheat.libs.io.tables import table_exists, trace_rows
    from tests.shared_jvm import WAREHOUSE_CONF

    warehouse = Path(spark.conf.get(WAREHOUSE_CONF))
    if not table_exists(warehouse, table):
        return None
    return trace_rows(spark, warehouse, table, trace_id)


def requests_of(spark: Any, trace_id: str) -> list[dict[str, Any]]:
    return sorted(_log_rows(spark, "requests", trace_id) or [], key=lambda r: r["seq"])


def rejects_of(spark: Any, trace_id: str) -> list[tuple[int, str]]:
    rows = sorted(_log_rows(spark, "rejected_records", trace_id) or [],
                  key=lambda r: (r["source_file"], r["position"]))
    return [(r["position"], r["reason"]) for r in rows]


def trace_row(spark: Any, trace_id: str) -> dict[str, Any] | None:
    rows = _log_rows(spark, "traces", trace_id) or []
    assert len(rows) <= 1
    return rows[0] if rows else None


def table_count(spark: Any, table: str, trace_id: str) -> int:
    return len(_log_rows(spark, table, trace_id) or [])


def make_requests(spark: Any, rows: list[tuple[str, int, int, str, int, int]], trace_id: str = "t") -> Any:
    """A `requests` DataFrame from (device, seq, ts_us, op, offset_bytes, size_bytes) tuples."""
    full = [(trace_id, d, seq, ts, op, off, size, None, None, "hand-built") for d, seq, ts, op, off, size in rows]
    return spark.createDataFrame(full, R.SPARK_SCHEMA)


MSR_T0 = 128_166_372_000_000_000  # FILETIME ticks (100 ns) of the first record


def write_msr(path: Any, rows: list[tuple[int, int, str, int, int]]) -> Any:
    """An MSR Cambridge CSV from (ts_us, disk, op 'R'/'W', offset_bytes, size_bytes), sorted by time;
    host "h", so devices are h_<disk>; response 10 us."""
    path.write_text("".join(f"{MSR_T0 + ts_us * 10},h,{disk},{'Read' if op == 'R' else 'Write'},{off},{size},100\n"
                            for ts_us, disk, op, off, size in sorted(rows)))
    return path


SRT_RECORD_BYTES = 56  # the bundled hplajw trace: version-4 short I/O records


def write_srt_days(path: Any, source: Any, days: range) -> Any:
    """A cut of an HP SRT trace: its header and the records whose enqueue time (word 2, seconds since the
    trace start) falls in the given trace days."""
    import struct
    from pathlib import Path

    data = Path(source).read_bytes()
    body = data.index(b"\x0c") + 1
    records = [data[i:i + SRT_RECORD_BYTES] for i in range(body, len(data), SRT_RECORD_BYTES)]
    kept = [r for r in records if struct.unpack_from(">I", r, 8)[0] // 86_400 in days]
    Path(path).write_bytes(data[:body] + b"".join(kept))
    return path


def table_digest(spark: Any, warehouse: Path, name: str, trace_id: str, drop: tuple[str, ...] = ("trace_id",),
                 where: Any = None) -> str:
    """SHA-256 (16 hex digits) of one trace's rows of a table (those `where(row)` keeps) without the `drop`
    columns, sorted: pins a table exactly. Read from the files its log lists (libs.io.tables.trace_rows: no Spark
    job; Spark only when the reader refuses the log); for tables without nested columns the same digest as the
    rows collected by Spark (the dicts keep the columns' order and collect()'s values)."""
    import hashlib

    from blockheat.libs.io.tables import trace_rows

    rows = sorted(repr(tuple(v for k, v in r.items() if k not in drop))
                  for r in trace_rows(spark, warehouse, name, trace_id) if where is None or where(r))
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16]


def python_child(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -c code args` in a fresh process from the repository root, Spark's Python workers on this
    interpreter (a session of its own, apart from the tests' one)."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True,
                          timeout=300, check=False, cwd=Path(__file__).resolve().parents[1])
