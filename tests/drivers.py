"""Spark drivers the cluster and fault-tolerance tests start as separate processes (a process holds one
SparkContext, and the test session's is local): `python -m tests.drivers pipeline|write ...`.

The master comes from BLOCKHEAT_SPARK_MASTER and the warehouse from --warehouse; settings match the test
session's (tests/conftest.py), so local and cluster runs differ in where tasks run only.
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from blockheat.libs.io.session import SparkConfig, build_session

SLICE_TRACE_ID = "hplajw-slice"
SLICE_RECORDS = 3000             # the first 3,000 requests of hplajw span 2.6 days (3 ALIS intervals)
SRT_RECORD_BYTES = 56
TEST_CONF = {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
             "spark.databricks.delta.snapshotPartitions": "2", "spark.ui.showConsoleProgress": "false"}
GENERATED_TRACE_ID = "generated"


def write_slice(source: Path, dest: Path, records: int = SLICE_RECORDS) -> Path:
    """The header and first `records` records of a real HP SRT trace: still a valid trace of that format."""
    data = source.read_bytes()
    body = data.index(b"\x0c") + 1                       # the header ends with one form feed
    dest.write_bytes(data[: body + records * SRT_RECORD_BYTES])
    return dest


def slice_grid(grid_id: str, speedups: Sequence[float]) -> dict[str, Any]:
    """Scenario grid over the slice: the traced disks from the SRT header, one scenario per speed-up."""
    return {"grid_id": grid_id, "traces": [SLICE_TRACE_ID], "base": {"spec": "from-trace", "scheduler": "clook"},
            "scenarios": [{"scenario_id": "traced"},
                          {"scenario_id": "striped", "layout": {"kind": "striped", "unit_sectors": 128}}],
            "sweep": {"speedup": list(speedups)}}


def run_pipeline(spark: Any, cfg: SparkConfig, trace: Path, grid_file: Path, *, announce: bool = False) -> None:
    """ingest -> heat (whole trace) -> ALIS graph -> simulation grid, as the CLI runs them; `announce` prints
    {"step": NAME} before each step."""
    from blockheat.jobs import alis_graph, extent_heat, simulate
    from blockheat.libs.simulation.grid import load_grid
    from tests.builders import ingest

    steps = (("ingest", lambda: ingest(spark, cfg, "hp-srt", SLICE_TRACE_ID, [trace])),
             ("heat", lambda: extent_heat.run(spark, cfg, extent_heat.HeatConfig(SLICE_TRACE_ID, window_us=0))),
             ("graph", lambda: alis_graph.run(spark, cfg, alis_graph.GraphOptions(SLICE_TRACE_ID))),
             ("simulate", lambda: simulate.run(spark, cfg, load_grid(grid_file))))
    for name, step in steps:
        if announce:
            print(json.dumps({"step": name}), flush=True)
        step()


def generated_requests(spark: Any, n: int) -> Any:
    """n requests of trace GENERATED_TRACE_ID on 4 devices, computed from their position (no input files)."""
    from pyspark.sql import functions as F

    from blockheat.schemas import requests as R

    i = F.col("id")
    return spark.range(0, n, 1, 8).select(
        F.lit(GENERATED_TRACE_ID).alias("trace_id"), (i % 4).cast("string").alias("device"), i.alias("seq"),
        (i * 1000).alias("ts_us"), F.when(i % 3 == 0, "R").otherwise("W").alias("op"),
        ((i * 7919) % 1_000_000 * 4096).alias("offset_bytes"), F.lit(4096).cast("long").alias("size_bytes"),
        F.lit(None).cast("double").alias("response_us"), F.lit(None).cast("double").alias("queue_us"),
        F.lit("generated").alias("source_file")).select(*R.COLUMNS)


class StageReporter:
    """Prints one JSON line per change of an active stage's task counts (total, active, done, failed), so a
    test can act while tasks run and see that lost ones were retried."""

    def __init__(self, spark: Any, every_s: float = 0.05) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.every_s = every_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> StageReporter:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _poll(self) -> None:
        seen: dict[int, tuple[int, int, int, int]] = {}
        while not self.stop.wait(self.every_s):
            for stage in self.tracker.getActiveStageIds():
                info = self.tracker.getStageInfo(stage)
                if info is None:
                    continue
                counts = (info.numTasks, info.numActiveTasks, info.numCompletedTasks, info.numFailedTasks)
                if seen.get(stage) != counts:
                    seen[stage] = counts
                    print(json.dumps(dict(zip(("stage", "total", "active", "done", "failed"), (stage, *counts),
                                              strict=True))), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tests.drivers")
    parser.add_argument("what", choices=("pipeline", "write"))
    parser.add_argument("--warehouse", type=Path, required=True)
    parser.add_argument("--trace", type=Path, help="pipeline: the SRT slice")
    parser.add_argument("--grid", type=Path, help="pipeline: the grid file")
    parser.add_argument("--rows", type=int, default=0, help="write: generated requests")
    args = parser.parse_args(argv)
    cfg = SparkConfig.from_env(f"tests.drivers {args.what}", **TEST_CONF)
    cfg = replace(cfg, warehouse=args.warehouse.resolve())
    spark = build_session(cfg)
    if args.what == "pipeline":
        with StageReporter(spark, every_s=0.01):
            run_pipeline(spark, cfg, args.trace, args.grid, announce=True)
    else:
        from blockheat.libs.io.tables import replace_trace

        print("writing", flush=True)
        replace_trace(generated_requests(spark, args.rows), spark, cfg.warehouse, "requests", GENERATED_TRACE_ID)
    print("done", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
