"""Test helpers: run an ingest and read back what it wrote."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from jobs.ingest_trace import IngestSummary, run
from libs.ingest import IngestOptions
from libs.spark import SparkConfig
from schemas import requests as R


def ingest(spark: Any, cfg: SparkConfig, fmt: str, trace_id: str, paths: list[Any], **options: Any) -> IngestSummary:
    opts = IngestOptions(fmt, trace_id, tuple(str(p) for p in paths),
                         staging=cfg.warehouse / "_staging", **options)
    return run(spark, cfg, opts)


def requests_of(spark: Any, trace_id: str) -> list[dict[str, Any]]:
    rows = spark.sql(f"SELECT * FROM requests WHERE trace_id = '{trace_id}' ORDER BY seq").collect()
    return [r.asDict() for r in rows]


def rejects_of(spark: Any, trace_id: str) -> list[tuple[int, str]]:
    rows = spark.sql(f"SELECT position, reason FROM rejected_records WHERE trace_id = '{trace_id}' "
                     "ORDER BY source_file, position").collect()
    return [(r.position, r.reason) for r in rows]


def trace_row(spark: Any, trace_id: str) -> dict[str, Any] | None:
    rows = spark.sql(f"SELECT * FROM traces WHERE trace_id = '{trace_id}'").collect()
    assert len(rows) <= 1
    return rows[0].asDict(recursive=True) if rows else None


def table_count(spark: Any, table: str, trace_id: str) -> int:
    if not spark.catalog.tableExists(table):
        return 0
    return int(spark.sql(f"SELECT count(*) FROM {table} WHERE trace_id = '{trace_id}'").first()[0])


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


def rows_digest(df: Any, drop: tuple[str, ...] = ("trace_id",)) -> str:
    """SHA-256 (16 hex digits) of a small DataFrame's sorted rows without `drop`: pins a table exactly."""
    import hashlib

    rows = sorted(repr(tuple(r)) for r in df.drop(*drop).collect())
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16]


def python_child(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -c code args` in a fresh process from the repository root, Spark's Python workers on this
    interpreter (a session of its own, apart from the tests' one)."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True,
                          timeout=300, check=False, cwd=Path(__file__).resolve().parents[1])
