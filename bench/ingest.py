"""Ingest benchmark: blockheat CSV -> Delta against DuckDB CSV -> Parquet on the same file, and
binary vSCSI ingest, in one process on local[2].

    .venv/bin/python bench/ingest.py --millions 5 --vscsi-millions 10 [--general] [--warehouse s3a://bench/wh]
    .venv/bin/python bench/ingest.py --millions 20 --marginal-from 2 --vscsi-millions 0.1

Prints requests per second for each and the blockheat/DuckDB ratio, and the vSCSI
rate (goal >= 2 million requests per second). With --marginal-from M both engines also ingest a CSV of M million
requests in each round, and the marginal rates from M to --millions (bench/marginal.py) give the ratio the speed
goal is set on (>= 1.2). Both engines get a warm-up run on a small file
first, so the ratio compares steady-state throughput, not JVM start-up.

--warehouse s3a://bucket/prefix writes the Delta tables (and the ingest's staging) to an object store: without
AWS_ENDPOINT_URL set the bench starts S3Proxy on loopback itself (bench/object_store.py). The generated traces
stay local files, read by both engines; DuckDB writes its Parquet locally.
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import marginal  # (bench/marginal.py, next to this script)
import object_store  # (bench/object_store.py, next to this script)

FILETIME_T0 = 128_166_372_000_000_000


def make_msr_csv(path: Path, n: int, seed: int = 7) -> None:
    """n MSR-format requests on 4 disks of one host, time-ordered, written in 1M-row chunks."""
    rng = np.random.default_rng(seed)
    t = FILETIME_T0
    with open(path, "wb") as out:
        for start in range(0, n, 1_000_000):
            k = min(1_000_000, n - start)
            ts = t + np.cumsum(rng.integers(1, 20_000, k))
            t = int(ts[-1])
            table = pa.table({
                "ts": ts,
                "host": pa.array(["src1"] * k),
                "disk": rng.integers(0, 4, k),
                "type": np.where(rng.random(k) < 0.35, "Read", "Write"),
                "offset": rng.integers(0, 1 << 27, k) * 512,
                "size": rng.choice(np.array([512, 4096, 8192, 16384, 65536]), k),
                "rt": rng.integers(50, 200_000, k),
            })
            pacsv.write_csv(table, out, pacsv.WriteOptions(include_header=False, quoting_style="none"))


def make_vscsi(path: Path, n: int, seed: int = 11) -> None:
    from blockheat.libs.readers.binary import VSCSI_DTYPES

    rng = np.random.default_rng(seed)
    recs = np.zeros(n, dtype=VSCSI_DTYPES[2])
    recs["cmd"] = np.where(rng.random(n) < 0.4, 0x28, 0x2A)
    recs["ver"] = 0x0200
    recs["sn"] = np.arange(n)
    recs["len"] = rng.choice(np.array([4096, 8192, 65536]), n)
    recs["nsg"] = 1
    recs["lbn"] = rng.integers(0, 1 << 30, n)
    recs["ts"] = np.cumsum(rng.integers(1, 500, n))
    recs["rt"] = rng.integers(50, 20_000, n)
    recs.tofile(path)


def duckdb_csv_to_parquet(csv: Path, out: Path) -> float:
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads = 2")
    start = time.perf_counter()
    con.execute(
        f"COPY (SELECT * FROM read_csv('{csv}', header = false, columns = {{"
        "'ts': 'BIGINT', 'host': 'VARCHAR', 'disk': 'INTEGER', 'type': 'VARCHAR', "
        "'offset': 'BIGINT', 'size': 'BIGINT', 'rt': 'BIGINT'})) "
        f"TO '{out}' (FORMAT parquet)"
    )
    elapsed = time.perf_counter() - start
    con.close()
    return elapsed


class _Said(logging.Handler):
    """Collects libs.ingest.pipeline's log lines (which path read the trace)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def blockheat_ingest(spark, cfg, fmt: str, trace_id: str, path: Path,  # type: ignore[no-untyped-def]
                     fast_text: bool = True) -> float:
    from blockheat.jobs.ingest_trace import run
    from blockheat.libs.ingest.pipeline import IngestOptions, staging_location

    opts = IngestOptions(fmt, trace_id, (str(path),), staging=staging_location(cfg.warehouse), fast_text=fast_text)
    said = _Said()
    logger = logging.getLogger("blockheat.libs.ingest.pipeline")
    logger.addHandler(said)
    level, propagate = logger.level, logger.propagate
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        start = time.perf_counter()
        summary = run(spark, cfg, opts)
        elapsed = time.perf_counter() - start
    finally:
        logger.removeHandler(said)
        logger.setLevel(level)
        logger.propagate = propagate
    assert summary.trace["records_rejected"] == 0, summary.trace["rejected_by_reason"]
    if fmt == "msr":      # the path the figure is for really read the file
        assert any("every one a clean request" in line for line in said.lines) == fast_text, said.lines
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--millions", type=float, default=5.0, help="MSR CSV requests (millions)")
    parser.add_argument("--vscsi-millions", type=float, default=10.0, help="vSCSI requests (millions)")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each, alternating (median)")
    parser.add_argument("--general", action="store_true",
                        help="also time one ingest of the CSV through the general text path (a trace with bad lines)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark setting for the blockheat side (repeatable)")
    parser.add_argument("--marginal-from", type=float, default=None, metavar="M",
                        help="also time both engines on a CSV of M million requests and print the marginal rates "
                             "from M to --millions (each run's fixed cost left out)")
    object_store.add_option(parser)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="blockheat-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    with object_store.warehouse(args.warehouse, work) as wh:
        code = run(args, work, wh)
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return code


def run(args: argparse.Namespace, work: Path, wh: object_store.Warehouse) -> int:
    from blockheat.libs.io.session import SparkConfig, build_session

    n = int(args.millions * 1_000_000)
    nv = int(args.vscsi_millions * 1_000_000)
    csv, small, vscsi, small_vscsi = work / "msr.csv", work / "warm.csv", work / "vm.vscsi", work / "warm.vscsi"
    t = time.perf_counter()
    make_msr_csv(csv, n)
    make_msr_csv(small, 100_000)
    make_vscsi(vscsi, nv)
    make_vscsi(small_vscsi, 100_000)
    print(f"generated {n:,} MSR requests ({csv.stat().st_size / 1e6:,.0f} MB) and {nv:,} vSCSI "
          f"requests in {time.perf_counter() - t:.1f} s", flush=True)

    print(f"warehouse: {wh.label}", flush=True)
    cfg = SparkConfig(master="local[2]", warehouse=wh.location, app_name="bench-ingest",
                      extra={"spark.ui.showConsoleProgress": "false", **dict(kv.split("=", 1) for kv in args.conf)})
    spark = build_session(cfg)
    duckdb_csv_to_parquet(small, work / "warm.parquet")               # warm-ups
    blockheat_ingest(spark, cfg, "msr", "warm", small)
    blockheat_ingest(spark, cfg, "vscsi", "warm-vscsi", small_vscsi)

    runs: dict[str, list[float]] = {"duck": [], "msr": [], "vscsi": [], "duck-base": [], "msr-base": []}
    m = int((args.marginal_from or 0) * 1_000_000)
    if m and not 0 < m < n:
        raise SystemExit("--marginal-from M needs 0 < M < --millions")
    base = work / "base.csv"
    if m:
        make_msr_csv(base, m)
    for _ in range(args.repeat):
        (work / "duck.parquet").unlink(missing_ok=True)
        runs["duck"].append(duckdb_csv_to_parquet(csv, work / "duck.parquet"))
        runs["msr"].append(blockheat_ingest(spark, cfg, "msr", "bench-msr", csv))
        runs["vscsi"].append(blockheat_ingest(spark, cfg, "vscsi", "bench-vscsi", vscsi))
        if m:
            (work / "duck.parquet").unlink(missing_ok=True)
            runs["duck-base"].append(duckdb_csv_to_parquet(base, work / "duck.parquet"))
            runs["msr-base"].append(blockheat_ingest(spark, cfg, "msr", "bench-msr", base))
    duck, ours, vs = (statistics.median(runs[k]) for k in ("duck", "msr", "vscsi"))
    for key, label in (("duck", "DuckDB CSV"), ("msr", "blockheat CSV"), ("vscsi", "blockheat vSCSI")):
        print(f"runs, {label}: " + ", ".join(f"{t:.2f} s" for t in runs[key]))
    print(f"DuckDB    CSV -> Parquet : {n / duck / 1e6:6.2f} M req/s ({duck:.2f} s, median of {args.repeat})")
    print(f"blockheat CSV -> Delta   : {n / ours / 1e6:6.2f} M req/s ({ours:.2f} s, median of {args.repeat})")
    print(f"ratio blockheat / DuckDB : {duck / ours:6.2f}; first runs only: "
          f"{runs['duck'][0] / runs['msr'][0]:.2f}; warehouse {wh.label}")
    print(f"blockheat vSCSI -> Delta : {nv / vs / 1e6:6.2f} M req/s ({vs:.2f} s, median of {args.repeat})  "
          f"(goal >= 2.0); first run only: {nv / runs['vscsi'][0] / 1e6:.2f} M req/s")
    if m:
        duck_rate = marginal.rate(n, runs["duck"], m, runs["duck-base"], "DuckDB    CSV -> Parquet")
        ours_rate = marginal.rate(n, runs["msr"], m, runs["msr-base"], "blockheat CSV -> Delta  ")
        print(f"marginal ratio blockheat / DuckDB: {ours_rate / duck_rate:.2f} (goal >= 1.2)")
    if args.general:
        general = blockheat_ingest(spark, cfg, "msr", "bench-msr-general", csv, fast_text=False)
        print(f"blockheat CSV, general path (Spark's text reader; what a trace with a bad line takes): "
              f"{n / general / 1e6:.2f} M req/s ({general:.2f} s, one run), {duck / general:.2f}x DuckDB")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
