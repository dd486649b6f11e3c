"""Start-up of Spark's Python workers with blockheat's daemon (libs/io/spark_daemon.py) against pyspark's own.

    .venv/bin/python bench/python_workers.py --rounds 5

Each round runs one cold child process per variant, rotating the order: build_session (local[2]), then a
first Arrow stage (mapInArrow over 2 partitions: the daemon starts and forks a worker per task), then a
second one over 8 partitions; worker reuse is off, so each task forks a new worker: what a short job's Python
stages pay before any data. Each task imports what an ingest task imports (pyarrow, numba, libs.ingest.pipeline).
Variants: "pyspark" sets `spark.python.daemon.module` back to `pyspark.daemon` (the reference); "lean" is
blockheat's daemon importing nothing before it forks (BLOCKHEAT_WORKER_MODULES=""); "blockheat" is its default,
the workers' modules imported once by the daemon. Prints the median seconds per variant and the ratios to the
reference.
"""
from __future__ import annotations

import argparse
import statistics

from cold import cold_run

CHILD = """
import json, os, shutil, sys, tempfile, time
from pathlib import Path
from blockheat.libs.io.session import SparkConfig, build_session
extra = {"spark.sql.shuffle.partitions": "2", "spark.python.worker.reuse": "false"}
if sys.argv[1] == "pyspark":
    extra["spark.python.daemon.module"] = "pyspark.daemon"
if sys.argv[1] == "lean":
    os.environ["BLOCKHEAT_WORKER_MODULES"] = ""
wh = Path(tempfile.mkdtemp(prefix="bench-pyw-"))
spark = build_session(SparkConfig(master="local[2]", warehouse=wh, app_name="bench-pyw", extra=extra))
df = spark.range(0, 2000, numPartitions=2)

def same(batches):
    import blockheat.libs.ingest.pipeline  # noqa: F401  (what an ingest task imports: pyarrow, numba, the readers)
    yield from batches

t0 = time.perf_counter()
df.mapInArrow(same, df.schema).count()
t1 = time.perf_counter()
spark.range(0, 8000, numPartitions=8).mapInArrow(same, df.schema).count()
t2 = time.perf_counter()
spark.stop()
shutil.rmtree(wh, ignore_errors=True)
print("RESULT " + json.dumps({"first_stage_s": t1 - t0, "eight_new_workers_s": t2 - t1}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    variants = ("pyspark", "lean", "blockheat")
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    for r in range(args.rounds):
        for v in variants[r % 3:] + variants[:r % 3]:
            runs[v].append(cold_run(CHILD, v))
            print(f"round {r + 1} {v}: " + ", ".join(f"{k} {x:.2f}" for k, x in runs[v][-1].items()), flush=True)
    med = {v: {k: statistics.median(x[k] for x in runs[v]) for k in runs[v][0]} for v in variants}
    for k in med["pyspark"]:
        ref = med["pyspark"][k]
        print(f"{k}: " + ", ".join(f"{v} {med[v][k]:.2f} s ({med[v][k] / ref:.2f}x)" for v in variants))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
