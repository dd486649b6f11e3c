"""Cold start of a short Spark application with and without the environment's JVM class archive (libs/io/jvm.py).

    .venv/bin/python bench/jvm_start.py --rounds 3

Each round runs the same child process per variant, alternating the order: build_session (local[2]),
libs.io.jvm.sample_workload (the one the archive is made from: Delta writes, a read, an Arrow UDF, SQL), then
stop: roughly what a nightly stage does on one day's data, minus the data. Without the archive
the child's JVM gets -Xshare:auto and no archive file (the JDK's own base archive only); with it, the
environment's (made first if missing). Both variants run again with -XX:TieredStopAtLevel=1 -XX:+UseSerialGC
(the short-job flags). Prints seconds per variant (median of the rounds) and the ratios.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

from cold import REPO, cold_run

sys.path.insert(0, str(REPO))

CHILD = """
import json, shutil, sys, tempfile, time
t0 = time.perf_counter()
from pathlib import Path
import blockheat.libs.io.jvm as J
if sys.argv[1] == "off":
    J.archive_options = lambda prefix=None: []          # as if the environment had none
from blockheat.libs.io.session import SparkConfig, build_session
wh = Path(tempfile.mkdtemp(prefix="bench-jvm-"))
spark = build_session(SparkConfig(master="local[2]", warehouse=wh, app_name="bench-jvm",
                                  extra={"spark.driver.extraJavaOptions": sys.argv[2],
                                         "spark.sql.shuffle.partitions": "2"}))
t1 = time.perf_counter()
J.sample_workload(spark, wh)
t2 = time.perf_counter()
spark.stop()
shutil.rmtree(wh, ignore_errors=True)
print("RESULT " + json.dumps({"session_s": t1 - t0, "work_s": t2 - t1, "total_s": t2 - t0}))
"""

SHORT = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def once(archive: bool, java: str) -> dict[str, float]:
    return cold_run(CHILD, "on" if archive else "off", java)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from blockheat.libs.io.jvm import make_archive

    print(f"archive: {make_archive()}", flush=True)
    once(True, "")                                   # warm the page cache for the archive and the jars
    results: dict[str, list[dict[str, float]]] = {}
    variants = [("default", False, ""), ("archive", True, ""), ("short", False, SHORT), ("short+archive", True, SHORT)]
    for r in range(args.rounds):
        order = variants if r % 2 == 0 else variants[::-1]
        for name, archive, java in order:
            results.setdefault(name, []).append(once(archive, java))
    load = os.getloadavg()[0]
    med = {name: {k: statistics.median(x[k] for x in runs) for k in runs[0]} for name, runs in results.items()}
    for name, m in med.items():
        print(f"{name:14s} session {m['session_s']:5.1f} s  work {m['work_s']:5.1f} s  total {m['total_s']:5.1f} s")
    print(f"archive / default: {med['archive']['total_s'] / med['default']['total_s']:.2f}x; "
          f"short+archive / default: {med['short+archive']['total_s'] / med['default']['total_s']:.2f}x; "
          f"short+archive / short: {med['short+archive']['total_s'] / med['short']['total_s']:.2f}x "
          f"(median of {args.rounds} rounds, load average {load:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
