"""Profile benchmark: the full trace profile (all metrics, whole trace and 1 h windows, trace and
device scope) on a generated trace of N million requests, local[2] (issue 3 item 12).

    .venv/bin/python bench/trace_profile.py --millions 5

(The issue names it bench/profile.py; that name would shadow the standard library's `profile`,
which pyspark imports through cProfile, for every script run from bench/.)

Prints requests per second against the goal of 1.3 million (a C trace analyzer reaches 1.31 million
per second single-threaded on 20 million requests) and the peak resident memory of the whole
process tree (this Python driver, the JVM and its Python workers), sampled every 50 ms, against
the 2 GiB goal. A warm-up run on 200,000 requests comes first.
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from memory import PeakMemory  # noqa: E402  (bench/memory.py, next to this script)

GOAL_RPS = 1.3e6
GOAL_BYTES = 2 << 30


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--millions", type=float, default=5.0)
    parser.add_argument("--driver-memory", default="1g", help="Spark driver heap (local mode: the only JVM)")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    from heat import load, make_requests  # bench/heat.py

    from libs.spark import SparkConfig, build_session
    from libs.tables import read_table, replace_rows
    from libs.transforms.profile import compute_trace_profile

    tmp = Path(args.workdir or tempfile.mkdtemp(prefix="bench-profile-"))
    tmp.mkdir(parents=True, exist_ok=True)
    cfg = SparkConfig(master="local[2]", warehouse=tmp / "warehouse", app_name="bench-profile",
                      extra={"spark.ui.showConsoleProgress": "false", "spark.driver.memory": args.driver_memory})
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = build_session(cfg)
    n = int(args.millions * 1_000_000)
    for trace_id, count in (("warm", 200_000), ("bench", n)):
        table = make_requests(count, trace_id)
        load(spark, cfg, table, trace_id, tmp)
        span = int(table["ts_us"][-1].as_py())
        del table
        with PeakMemory() as mem:
            t0 = time.perf_counter()
            persisted: list = []
            profile = compute_trace_profile(read_table(spark, cfg.warehouse, "requests", trace_id), span_us=span,
                                            persisted=persisted)
            eager = time.perf_counter() - t0  # the per-chunk table and the ordered pass run here
            replace_rows(profile, spark, cfg.warehouse, "trace_profile", {"trace_id": trace_id})
            for df in persisted:
                df.unpersist()
            elapsed = time.perf_counter() - t0
        rows = read_table(spark, cfg.warehouse, "trace_profile", trace_id).count()
    print(f"requests: {n:,}; profile rows written: {rows:,}")
    print(f"blockheat profile : {n / elapsed / 1e6:6.3f} M req/s ({elapsed:.1f} s); "
          f"ratio to the 1.3 M req/s goal: {n / elapsed / GOAL_RPS:.2f}")
    print(f"  of which the per-chunk table and the ordered pass {eager:.1f} s, the block pass, merges and "
          f"Delta write {elapsed - eager:.1f} s")
    print(f"peak memory (driver + JVM + workers): {mem.peak / 2**30:.2f} GiB; "
          f"ratio to the 2 GiB goal: {mem.peak / GOAL_BYTES:.2f}")
    spark.stop()
    if not args.workdir:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
