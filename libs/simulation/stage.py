"""The Spark simulation stage: every (trace, array group, scenario) of a scenario grid simulated by sim.scenarios
on an executor (a scenario's policy, e.g. disk cooling, runs there too), written to `sim_results`,
`sim_timeseries` and `cooling_moves`. Run by jobs/simulate.py and by the policy scorecard."""
from __future__ import annotations

import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import functions as F

from blockheat.libs.io import storage
from blockheat.libs.io.connect import is_remote, parallelism
from blockheat.libs.io.delta_files import replace_from_driver
from blockheat.libs.io.table_versions import table_version
from blockheat.libs.io.tables import read_table, table_exists, table_target, trace_info
from blockheat.libs.io.task_parquet import (
    Opener,
    from_ipc,
    release_memory,
    remove_unreported,
    scratch_dir,
    task_file_name,
    task_opener,
    to_ipc,
)
from blockheat.libs.io.worker import python_task
from blockheat.libs.simulation.grid import Grid, Part, plan_parts
from blockheat.libs.simulation.spill import SPAN_REQUESTS, spill_requests
from blockheat.libs.table_io.device_pass import Unsupported, row_groups, spark_tasks, trace_files
from blockheat.schemas import cooling_moves, sim_results, sim_timeseries
from blockheat.schemas.requests import REPLAY_COLUMNS
from blockheat.sim import (
    AlisPolicy,
    CoolingPolicy,
    GreedyAllocation,
    RoundRobinExtents,
    SpilledRequests,
    Striped,
    scenario_streams,
    simulate_chunks,
    simulate_requests,
)
from blockheat.sim import requests_from_parquet_files as from_parquet_files

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from blockheat.libs.io.session import SparkConfig

log = logging.getLogger(__name__)

#: What each partition returns: a sim_results row without grid_id (stamped when written), the scenario's
#: time series and its cooling moves nested as lists, so the simulation runs once for all three tables.
OUTPUT_ARROW_SCHEMA = pa.schema([
    *[f for f in sim_results.ARROW_SCHEMA if f.name != "grid_id"],
    pa.field("timeseries", pa.list_(pa.struct(list(sim_timeseries.INTERVAL_SCHEMA))), False),
    pa.field("cooling_moves", pa.list_(pa.struct(list(cooling_moves.MOVE_SCHEMA))), False),
])
SUMMARY_COLUMNS = ("trace_id", "array_group", "scenario_id", "layout", "speedup", "requests", "mean_response_ms",
                   "p95_response_ms", "hottest_utilization", "saturated")


class SimulationError(RuntimeError):
    """A partition failed on its executor; the message names the trace, array group and scenario."""


@dataclass(frozen=True)
class TableFiles:
    """Replay the `requests` table's own Parquet files, each lane reading its array group's (no staging pass):
    the rows of Delta version `version` (None: the current one), with start <= ts_us < end when window_us is
    given. Staging (stage_requests) stands in when the files cannot be read directly or the table moved on."""

    version: int | None = None
    window_us: tuple[int, int] | None = None


@dataclass(frozen=True)
class SimulateSummary:
    grid_id: str
    partitions: int
    results: list[dict[str, Any]]     # the grid's sim_results rows (SUMMARY_COLUMNS), in grid order
    timeseries_rows: int
    seconds: float
    cooling_moves: int = 0            # rows written to cooling_moves


def run(spark: SparkSession, cfg: SparkConfig, grid: Grid, *, progress_every_s: float = 10.0,
        requests: DataFrame | None = None, files: TableFiles | None = None) -> SimulateSummary:
    """Simulates every (trace, array group, scenario) of the grid and replaces the grid's rows of sim_results,
    sim_timeseries and cooling_moves (one commit each, keyed by grid_id: a rerun replaces the whole grid;
    cooling_moves is written when a scenario has the cooling policy or the table already exists, so a rerun
    without cooling clears the grid's old moves). requests: the `requests` rows to replay, e.g. one time window
    of a trace read at a known Delta version, staged to scratch files first; files: the same rows read from the
    table's files by the lanes themselves (requests, when also given, stands in if they cannot be). Default:
    the table's current files."""
    started = time.perf_counter()
    catalog = {t.trace_id: trace_info(spark, cfg.warehouse, t.trace_id) for t in grid.traces}
    parts = plan_parts(grid, catalog)
    log.info("simulate grid %s (%s): %d partitions = %d trace(s) x array groups x %d scenario(s)",
             grid.grid_id, grid.source, len(parts), len(grid.traces), len(grid.scenarios))
    if files is None and requests is None:
        files = TableFiles()
    with scratch_dir(cfg.warehouse, f"simulate-{grid.grid_id[:40]}") as scratch:
        direct = None if files is None else table_files(spark, cfg.warehouse, list(catalog), files.version)
        if files is not None and direct is not None:
            staged, window = direct, files.window_us
        else:
            source = requests if requests is not None else _windowed(read_table(spark, cfg.warehouse, "requests"),
                                                                      files)
            staged, window = stage_requests(source.where(F.col("trace_id").isin(list(catalog))), str(scratch)), None
        missing = [p.key for p in parts if not any((p.trace_id, d) in staged for d in p.devices)]
        if missing:
            raise SimulationError(f"no requests for {len(missing)} partition(s) (trace, array group, scenario), "
                                  f"e.g. {missing[:3]}")
        with _Progress(spark, f"simulate {grid.grid_id}", len(parts), progress_every_s) as progress, \
                _executor_errors(), _claims_dir(spark, scratch) as claims:
            out = simulate_parts(spark, staged, longest_first(parts, catalog), progress=progress,
                                 by_device=direct is not None, window_us=window, claims=claims)
    by_key = {key: i for i, key in enumerate(zip(*(out.column(c).to_pylist() for c in
                                                   ("trace_id", "array_group", "scenario_id")), strict=True))}
    out = out.take(pa.array([by_key[p.key] for p in parts], pa.int64()))       # grid order
    n_series, n_moves = (int(pc.sum(pc.list_value_length(out.column(c))).as_py() or 0)
                         for c in ("timeseries", "cooling_moves"))
    where = {"grid_id": grid.grid_id}
    keys = ["trace_id", "array_group", "scenario_id"]
    replace_from_driver(spark, table_target(spark, cfg.warehouse, sim_results.TABLE), where,
                        out.drop_columns(["timeseries", "cooling_moves"]))
    replace_from_driver(spark, table_target(spark, cfg.warehouse, sim_timeseries.TABLE), where,
                        _unnested(out, keys, "timeseries"))
    cooling = any(isinstance(p.config.policy, CoolingPolicy) for p in parts)
    if cooling or table_exists(cfg.warehouse, cooling_moves.TABLE):
        replace_from_driver(spark, table_target(spark, cfg.warehouse, cooling_moves.TABLE), where,
                            _unnested(out, keys, "cooling_moves"))
    results = [dict(zip(SUMMARY_COLUMNS, values, strict=True))
               for values in zip(*(out.column(c).to_pylist() for c in SUMMARY_COLUMNS), strict=True)]
    seconds = time.perf_counter() - started
    log.info("simulate grid %s: %d results, %d time-series rows, %d cooling moves in %.1f s", grid.grid_id,
             len(results), n_series, n_moves, seconds)
    return SimulateSummary(grid.grid_id, len(parts), results, n_series, seconds, n_moves)


@contextmanager
def _claims_dir(spark: SparkSession, scratch: Path | str) -> Iterator[str | None]:
    """The lanes' claims directory (simulate_parts): claims are files created with O_EXCL, so it must be a directory
    of a file system every lane shares: the run's scratch under a local warehouse (a shared file system on a
    cluster), a local temporary directory of the driver's for a local master under an object-store warehouse (no
    exclusive create there); None otherwise, the lanes then simulating their fixed lists."""
    if isinstance(scratch, Path):
        (scratch / "claims").mkdir()
        yield str(scratch / "claims")
    elif (spark.conf.get("spark.master", None) or "").startswith("local"):
        with tempfile.TemporaryDirectory(prefix="blockheat-claims-") as claims:
            yield claims
    else:
        yield None


def _unnested(out: pa.Table, keys: Sequence[str], column: str) -> pa.Table:
    """One row per element of the list column `column`, its struct fields next to the row's `keys`."""
    lists = out.column(column).combine_chunks()
    lengths = pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False)
    rows = np.repeat(np.arange(out.num_rows), lengths)
    items = pc.list_flatten(lists)
    columns = {k: out.column(k).take(pa.array(rows, pa.int64())) for k in keys}
    for i, f in enumerate(items.type):
        columns[f.name] = items.field(i)
    return pa.table(columns)


#: A scenario's simulation time per request relative to the as-traced replay, by what it adds (the 10 M
#: scale trace's scorecard parts in one process, 2026-11-26, after the compiled merge: as-traced 15.0 s,
#: random 14.6, greedy 21.4, striped 21.4, track-aligned 21.6, cooling every 100 s of trace time (the
#: scorecard's period) about 1.5x as-traced, cooling every 100 arrivals 92 ("cooling_by_arrivals": each demon call
#: scans every extent); ALIS, with a plan per interval, not measured there and put between).
COST_FACTORS = {"cooling_by_arrivals": 6.1, "alis": 3.0, "cooling": 1.5, "io": 1.45, "striped": 1.45, "greedy": 1.4}


def expected_cost(part: Part, trace_requests: int, trace_devices: int) -> float:
    """The part's expected simulation time in as-traced requests: its share of the trace's requests (by
    devices) times the largest COST_FACTORS entry that applies."""

    factor = max([COST_FACTORS[k] for k, applies in _part_kinds(part).items() if applies], default=1.0)
    return trace_requests * len(part.devices) / max(trace_devices, 1) * factor


def _part_kinds(part: Part) -> dict[str, bool]:
    """Which of COST_FACTORS' kinds of work the part's scenario does."""
    cfg = part.config
    cooling = isinstance(cfg.policy, CoolingPolicy)
    return {"cooling_by_arrivals": cooling and cfg.policy.config.every_requests is not None,
            "alis": isinstance(cfg.policy, AlisPolicy), "cooling": cooling, "io": cfg.io is not None,
            "striped": isinstance(cfg.layout, Striped | RoundRobinExtents),
            "greedy": isinstance(cfg.policy, GreedyAllocation)}


def longest_first(parts: Sequence[Part], catalog: dict[str, dict[str, Any]]) -> list[Part]:
    """The parts by descending expected cost (ties in grid order): Spark starts partitions in index order,
    so the heaviest start first instead of one of them running alone at the end."""
    def cost(p: Part) -> float:
        info = catalog[p.trace_id]
        return expected_cost(p, int(info.get("records_accepted") or 0), len(info.get("devices") or ()))

    return sorted(parts, key=cost, reverse=True)


STAGED_DDL = "trace_id string, device string, path string, rows long"


def _stage(directory: str) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow function: the task's rows written to Parquet under `directory` (a local path or a URI), one file
    per (trace, device) it holds; yields STAGED_DDL rows."""
    opener = task_opener()

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        writers: dict[tuple[str, str], list[Any]] = {}
        fs, root = opener(directory)
        try:
            for batch in batches:
                table = pa.Table.from_batches([batch])
                keys = table.group_by(["trace_id", "device"], use_threads=False).aggregate([]).to_pylist()
                for key in keys:
                    rows = table if len(keys) == 1 else table.filter(
                        pc.and_(pc.equal(table.column("trace_id"), key["trace_id"]),
                                pc.equal(table.column("device"), key["device"])))
                    rows = rows.select(list(REPLAY_COLUMNS))
                    k = (key["trace_id"], key["device"])
                    if k not in writers:
                        name = task_file_name()
                        writers[k] = [pq.ParquetWriter(f"{root}/{name}", rows.schema, filesystem=fs,
                                                       **storage.parquet_options(rows.schema)),
                                      storage.join(directory, name), 0]
                    writers[k][0].write_table(rows)
                    writers[k][2] += rows.num_rows
        finally:
            for writer, _, _ in writers.values():
                writer.close()
        if writers:
            yield pa.RecordBatch.from_pydict({"trace_id": [k[0] for k in writers], "device": [k[1] for k in writers],
                                              "path": [w[1] for w in writers.values()],
                                              "rows": [w[2] for w in writers.values()]})

    return run


def _windowed(requests: DataFrame, files: TableFiles | None) -> DataFrame:
    if files is None or files.window_us is None:
        return requests
    return requests.where((F.col("ts_us") >= files.window_us[0]) & (F.col("ts_us") < files.window_us[1]))


def table_files(spark: SparkSession, warehouse: Path | str, trace_ids: Sequence[str],
                version: int | None) -> dict[tuple[str, str], list[str]] | None:
    """(trace, device) -> the `requests` table's files holding them (device is a partition column, so the files
    have no device column), or None when they cannot be read directly (deletion vectors, files outside the
    table) or the table is no longer at `version`: the snapshot listed is `version` when the table's latest
    version is that before and after the listing (files of a version are never rewritten)."""
    before = table_version(warehouse, "requests")
    try:
        listed = {t: trace_files(spark, warehouse, t) for t in trace_ids}
    except Unsupported as exc:
        log.info("simulate: the requests are staged (%s)", exc)
        return None
    if version is not None and not before == table_version(warehouse, "requests") == version:
        log.info("simulate: the requests are staged (the table is at version %s, not %s)", before, version)
        return None
    return {(t, d): paths for t, by_device in listed.items() for d, paths in by_device.items()}


def stage_requests(requests: DataFrame, directory: str) -> dict[tuple[str, str], list[str]]:
    """The requests to replay, written once to Parquet under `directory` (an empty directory every
    executor reaches: a local path or a URI) by the tasks that read them, one file per (trace, device) and
    task: (trace, device) -> files. Each part's task then reads its array group's files: the requests are not
    shuffled once per scenario (10 M requests x 8 scenarios would be 80 M rows through a shuffle)."""
    written = (requests.select("trace_id", *REPLAY_COLUMNS)
               .mapInArrow(python_task(_stage(directory)), STAGED_DDL).collect())
    remove_unreported(directory, {storage.name(r["path"]) for r in written})   # failed or duplicate attempts' files
    staged: dict[tuple[str, str], list[str]] = {}
    for r in written:
        staged.setdefault((r["trace_id"], r["device"]), []).append(r["path"])
    return staged


#: Memory per replayed request (bytes) a simulating lane holds, measured on the 100 M scale trace (2026-11-26,
#: probes of sim.workloads.from_parquet_files and sim.scenarios.simulate_requests, docs/BENCHMARKS.md): a lane converts
#: its parts' requests once (LANE_LOAD_BYTES at the conversion's peak, LANE_HELD_BYTES kept while its parts
#: simulate), and a part adds PART_EXTRA_BYTES by what it simulates (the largest entry that applies; ALIS's
#: plans were not measured at scale and are given room).
#: Parts this small (requests) run one task each when memory allows (Spark balances them as they finish);
#: sharing one conversion in a lane pays from about here on (a million requests convert in ~0.3 s).
LANE_MIN_REQUESTS = 1_000_000
LANE_LOAD_BYTES = 45
LANE_HELD_BYTES = 27
PART_EXTRA_BYTES = {"io": 90, "alis": 150, "cooling": 40, "other": 30}
#: Parts of at least this many requests replay from a spill on the lane's local disk (libs.simulation.spill), a
#: chunk at a time when their scenario streams (sim.scenarios.streams): a lane then holds a conversion span
#: (SPAN_REQUESTS x LANE_LOAD_BYTES at most) and a chunk of the spill, whatever the window's length.
STREAM_MIN_REQUESTS = 8_000_000
#: The share of the machine's memory the simulating lanes may hold at once (BLOCKHEAT_SIM_MEMORY_BYTES sets the
#: bytes instead; the driver's machine stands for the executors', as in local mode).
SIM_MEMORY_SHARE = 0.75


def sim_memory_bytes() -> int:
    """The memory the lanes simulating at once may hold (see SIM_MEMORY_SHARE)."""
    if env := os.environ.get("BLOCKHEAT_SIM_MEMORY_BYTES"):
        return int(env)
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * SIM_MEMORY_SHARE)


def part_memory(part: Part, requests: int, stream_min_requests: int = STREAM_MIN_REQUESTS) -> int:
    """The most a lane holds while it converts `requests` requests or simulates this part over them (a part that
    streams: a conversion span or a chunk of the spill)."""
    kinds = _part_kinds(part)
    extra = max([PART_EXTRA_BYTES[k] for k in ("io", "alis", "cooling") if kinds[k]], default=PART_EXTRA_BYTES["other"])
    cfg = part.config
    # A closed loop with background traffic holds the requests its clock has not reached (sim.engine): the window.
    paced = cfg.sim.closed_loop is None or cfg.background is None
    if requests >= stream_min_requests and scenario_streams(cfg) and paced:
        requests = min(requests, SPAN_REQUESTS)
    return requests * max(LANE_LOAD_BYTES, LANE_HELD_BYTES + extra)


def lanes_for(part_bytes: Sequence[int], cores: int, memory_bytes: int) -> int:
    """How many parts simulate at once: one per core, fewer while the parts of largest part_memory at that many
    would hold more than memory_bytes; at least one."""
    largest = sorted(part_bytes, reverse=True)
    lanes = max(1, min(cores, len(largest)))
    while lanes > 1 and sum(largest[:lanes]) > memory_bytes:
        lanes -= 1
    return lanes


def lane_assignment(costs: Sequence[float], lanes: int) -> list[list[int]]:
    """Parts (indices, in the given order: heaviest first) dealt to `lanes` lanes, each to the lane with the
    least cost so far (longest processing time first)."""
    load, out = [0.0] * lanes, [[] for _ in range(lanes)]
    for i, cost in enumerate(costs):
        lane = min(range(lanes), key=lambda k: (load[k], k))
        out[lane].append(i)
        load[lane] += cost
    return out


def simulate_parts(spark: SparkSession, staged: dict[tuple[str, str], list[str]], parts: Sequence[Part], *,
                   memory_bytes: int | None = None, progress: _Progress | None = None, by_device: bool = False,
                   window_us: tuple[int, int] | None = None, claims: str | None = None,
                   lane_min_requests: int = LANE_MIN_REQUESTS,
                   stream_min_requests: int = STREAM_MIN_REQUESTS, spill_rows: int | None = None) -> pa.Table:
    """The simulation stage: the parts dealt to one Spark task ("lane") per core, heaviest first (expected_cost),
    each lane converting its array group's staged requests once and simulating its parts one after another
    (parts under LANE_MIN_REQUESTS run one task each instead, when memory allows; parts of stream_min_requests or
    more replay from a spill, those whose scenario streams a chunk at a time; spill_rows: the spill's conversion
    spans and chunks, default libs.simulation.spill's);
    returns the OUTPUT_ARROW_SCHEMA rows, one per part in the given order. sim.workloads.from_parquet_files
    orders a lane's requests by (ts_us, seq) (the staged files come in no particular order).

    When the parts of largest part_memory simulating on every core at once would hold more than memory_bytes
    (default sim_memory_bytes()), there are fewer lanes (a 100 M-request scorecard part held 15-25 GB before the
    lanes shared their conversion: two at once were killed for memory on a 24 GB machine). by_device: the files
    are the `requests` table's own, without a device column (their key's device is theirs); window_us: replay
    only the rows with start <= ts_us < end.

    claims: a directory every lane can write (the run's scratch): the lanes then take their parts from one queue,
    heaviest first, each claiming the next part not claimed yet when it is free (claimed_parts), in place of the
    fixed lists of lane_assignment, whose costs are estimates (at 100 M requests the two lanes ended 130 s
    apart). A part a failed lane had claimed is simulated again afterwards (its results were lost with the
    task); a part simulated twice is kept once."""
    files = [[f for d in p.devices for f in staged.get((p.trace_id, d), [])] for p in parts]
    devices = [[d for d in p.devices for _ in staged.get((p.trace_id, d), [])] if by_device else None for p in parts]
    requests = [sum(_rows_in(f, window_us) for f in fs) for fs in files]
    spilled = [r >= stream_min_requests for r in requests]
    cores = parallelism(spark)
    memory = sim_memory_bytes() if memory_bytes is None else memory_bytes
    lanes = lanes_for([part_memory(p, r, stream_min_requests) for p, r in zip(parts, requests, strict=True)], cores,
                      memory)
    if lanes < min(cores, len(parts)):
        log.warning("simulate: %d parts in %d lane(s), not %d: the largest parts (%s requests) would hold more "
                    "than %.1f GiB at once", len(parts), lanes, min(cores, len(parts)), f"{max(requests):,}",
                    memory / 2**30)
    queue = None
    if lanes >= min(cores, len(parts)) and max(requests, default=0) < lane_min_requests:
        groups = [[i] for i in range(len(parts))]       # small parts: one task each, Spark balances them
    else:
        costs = [expected_cost(p, r, len(p.devices)) for p, r in zip(parts, requests, strict=True)]
        groups = lane_assignment(costs, lanes)
        if claims is not None and lanes > 1:
            order = sorted(range(len(parts)), key=lambda i: -costs[i])           # heaviest first, ties in order
            queue = _Queue(claims, order, [(*_load_key(files[i], p), spilled[i])
                                                   for i, p in enumerate(parts)])
    if progress is not None:
        progress.lanes_start(len(groups))
    done = dict(spark_tasks(spark, len(groups), _simulator(list(parts), files, groups, devices, window_us, queue,
                                                           spilled, spill_rows)))
    lost = [i for i in range(len(parts)) if i not in done]
    if lost:                        # claimed by a lane whose task failed and was retried: one task each now
        log.warning("simulate: %d part(s) claimed by a failed lane, simulated again", len(lost))
        done.update(spark_tasks(spark, len(lost), _simulator(list(parts), files, [[i] for i in lost], devices,
                                                             window_us, spilled=spilled, spill_rows=spill_rows)))
    return from_ipc([done[i] for i in range(len(parts))], OUTPUT_ARROW_SCHEMA)


@dataclass(frozen=True)
class _Queue:
    """The lanes' shared queue of parts: a claim is a file named after the part, created exclusively."""

    directory: str
    order: list[int]                 # the parts, heaviest first
    keys: list[Any]                  # the requests each part replays (parts with one key share a conversion)


def claimed_parts(queue: _Queue, loaded: Callable[[], Any]) -> Iterator[int]:
    """The parts this lane claims, one at a time as it asks for the next: the first in queue order that no lane
    has claimed, among those replaying the requests the lane holds (loaded()) if any is left, else among all."""
    seen: set[int] = set()
    while True:
        key = loaded()
        left = [i for i in queue.order if i not in seen]
        if not left:
            return
        for i in sorted(left, key=lambda i: queue.keys[i] != key):               # stable: queue order within
            seen.add(i)
            try:
                os.close(os.open(os.path.join(queue.directory, str(i)), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                continue
            yield i
            break
        else:
            return


def _load_key(files: Sequence[str], part: Part) -> tuple[Any, ...]:
    """What a lane's converted requests depend on: parts with the same key share one conversion."""
    return tuple(files), part.config.spec.sector_size, part.config.devices


def _rows_in(path: str, window_us: tuple[int, int] | None) -> int:
    """The file's rows, or with a window those of its row groups whose ts_us range meets it (an upper bound)."""
    if window_us is None:
        fs, where = storage.filesystem(path)
        return pq.read_metadata(where, filesystem=fs).num_rows
    return sum(g.rows for g in row_groups(path) if g.hi >= window_us[0] and g.lo < window_us[1])


def _simulator(parts: list[Part], files: list[list[str]], groups: list[list[int]],
               file_devices: list[list[str] | None] | None = None, window_us: tuple[int, int] | None = None,
               queue: _Queue | None = None, spilled: Sequence[bool] | None = None, spill_rows: int | None = None,
               ) -> Callable[[Iterator[int]], Iterator[tuple[int, bytes]]]:
    """The function each task runs: simulate its group's parts (with a queue: the parts it claims) one after
    another, yield (part, one OUTPUT_ARROW_SCHEMA row as Arrow IPC) for each. Parts replaying the same files (a
    scorecard's scenarios over one array group) share one conversion of the requests (load_requests:
    sim.workloads.from_parquet_files, one file read at a time; a spilled part's: libs.simulation.spill, replayed
    by sim.scenarios.simulate_chunks)."""
    opener = task_opener()
    spill = spilled or [False] * len(parts)

    def load(i: int, part: Part) -> Any:
        if spill[i]:
            sizes = {} if spill_rows is None else {"span_requests": spill_rows, "chunk_requests": spill_rows}
            return spill_requests(files[i], part.config.spec.sector_size, part.config.devices or (), opener,
                                  file_devices=file_devices[i] if file_devices else None, window_us=window_us, **sizes)
        return load_requests(files[i], part.config.spec.sector_size, part.config.devices,
                             file_devices[i] if file_devices else None, window_us, opener)

    def replay(held: Any, part: Part) -> Any:
        if isinstance(held, SpilledRequests):
            return simulate_chunks(held, held.facts(), tuple(part.config.devices or ()), part.trace_id, part.config)
        return simulate_requests(*held, part.trace_id, part.config)

    def simulate(lanes: Iterator[int]) -> Iterator[tuple[int, bytes]]:
        loaded: tuple[Any, Any] | None = None
        if queue is not None and os.path.isdir(queue.directory):
            chosen: Iterator[int] = claimed_parts(queue, lambda: None if loaded is None else loaded[0])
        else:                          # no queue, or an executor that cannot see it: the lane's own list
            chosen = (i for lane in lanes for i in groups[lane])
        for i in chosen:
            part = parts[i]
            t0 = time.perf_counter()
            try:
                key = (*_load_key(files[i], part), spill[i])
                if loaded is None or loaded[0] != key:
                    if loaded is not None and isinstance(loaded[1], SpilledRequests):
                        loaded[1].close()
                    loaded = None                       # the previous group's requests freed before reading
                    loaded = (key, load(i, part))
                out = replay(loaded[1], part)
            except Exception as exc:
                raise SimulationError(f"trace {part.trace_id!r}, array group {part.array_group!r}, scenario "
                                      f"{part.scenario_id!r}: {type(exc).__name__}: {exc}") from exc
            row = to_ipc(_output_row(part, out.result, out.series, time.perf_counter() - t0, out.moves))
            del out
            release_memory()               # the part's arrays, for the other lanes (glibc keeps freed pages)
            yield i, row
        if loaded is not None and isinstance(loaded[1], SpilledRequests):
            loaded[1].close()

    return simulate


def load_requests(files: Sequence[str], sector_size: int, devices: Sequence[str] | None,
                  file_devices: Sequence[str] | None = None,
                  window_us: tuple[int, int] | None = None, opener: Opener | None = None) -> tuple[Any, Any]:
    """(sim Requests, device names) from staged or table Parquet files (sim.workloads.from_parquet_files: one
    file's Arrow columns in memory at a time), the memory the conversion freed handed back to the OS. Files on an
    object store (URIs) are handed over opened (pyarrow random-access files, through `opener`, default
    libs.io.storage.filesystem): sim.workloads opens paths only."""
    opener = opener or storage.filesystem
    opened: list[Any] = []
    try:
        for f in files:
            if storage.is_local(f):
                opened.append(f)
            else:
                fs, where = opener(f)
                opened.append(fs.open_input_file(where))
        out = from_parquet_files(opened, sector_size=sector_size, devices=devices, file_devices=file_devices,
                                 window_us=window_us)
    finally:
        for f in opened:
            if not isinstance(f, str):
                f.close()
    release_memory()
    return out


def _nested(table: pa.Table, fields: Sequence[pa.Field], list_type: pa.DataType) -> pa.Array:
    """The table's rows (these fields of the table's contract, each column cast to the contract's type) as one list
    value."""
    items = pa.StructArray.from_arrays([table.column(f.name).combine_chunks().cast(f.type) for f in fields],
                                       fields=list(fields))
    return pa.ListArray.from_arrays(pa.array([0, len(items)], pa.int32()), items, type=list_type)


def _output_row(part: Part, row: pa.Table, series: pa.Table, wall_s: float, moves: pa.Table | None = None) -> pa.Table:
    """One OUTPUT_ARROW_SCHEMA row from sim.scenarios's result row, time series and cooling moves."""
    meta = {"trace_id": part.trace_id, "array_group": part.array_group, "scenario_id": part.scenario_id,
            "spec": part.config.spec.name, "layout": part.layout, "speedup": float(part.config.sim.speedup),
            "scenario_json": part.scenario_json, "wall_s": wall_s}
    nested = {
        "timeseries": _nested(series, list(sim_timeseries.INTERVAL_SCHEMA),
                              OUTPUT_ARROW_SCHEMA.field("timeseries").type),
        "cooling_moves": _nested(cooling_moves.MOVE_SCHEMA.empty_table() if moves is None else moves,
                                 list(cooling_moves.MOVE_SCHEMA), OUTPUT_ARROW_SCHEMA.field("cooling_moves").type),
    }
    columns = []
    for f in OUTPUT_ARROW_SCHEMA:
        if f.name in meta:
            columns.append(pa.array([meta[f.name]], f.type))
        elif f.name in nested:
            columns.append(nested[f.name])
        else:
            columns.append(row.column(f.name).combine_chunks())
    return pa.Table.from_arrays(columns, schema=OUTPUT_ARROW_SCHEMA)


@contextmanager
def _executor_errors() -> Iterator[None]:
    """A partition's SimulationError arrives inside the job's error (a Py4JJavaError holding the Python
    worker's traceback) whose first line says only that the task failed: raise the partition's own
    message instead (the job's error stays chained)."""
    try:
        yield
    except SimulationError:
        raise
    except Exception as exc:
        found = re.search(rf"{SimulationError.__name__}: (.*)", str(exc))
        if found is None:
            raise
        raise SimulationError(found.group(1).strip()) from exc


class _Progress:
    """Logs the simulation's progress while the action runs: a daemon thread polls Spark's status tracker for
    the stages of this job group (staging the requests, then one task per lane, each simulating its parts)."""

    def __init__(self, spark: SparkSession, group: str, total: int, every_s: float) -> None:
        # Under Spark Connect there is no status tracker to poll: only the start and the end are logged.
        self.sc = None if is_remote(spark) else spark.sparkContext
        self.group, self.total, self.every_s = group, total, every_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, name="simulate-progress", daemon=True)
        self.started = time.perf_counter()
        self.previous: str | None = None
        self.lanes = 0
        self.first_lane_stage = -1       # stages from this id on, with one task per lane, simulate

    def lanes_start(self, lanes: int) -> None:
        """The simulation's job (one task per lane) is about to start."""
        if self.sc is None:
            self.lanes = lanes
            return
        tracker = self.sc.statusTracker()
        seen = [s for j in tracker.getJobIdsForGroup(self.group) if (info := tracker.getJobInfo(j))
                for s in info.stageIds]
        self.lanes, self.first_lane_stage = lanes, max(seen, default=-1) + 1

    def __enter__(self) -> _Progress:
        if self.sc is None:
            return self
        self.previous = self.sc.getLocalProperty("spark.jobGroup.id")
        self.sc.setJobGroup(self.group, self.group)
        self.thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if self.sc is not None:
            self.stop.set()
            self.thread.join()
            self.sc.setLocalProperty("spark.jobGroup.id", self.previous)  # type: ignore[arg-type]  # None removes it
            self.sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
        if exc_type is None:
            log.info("simulate: %d partitions simulated in %.1f s", self.total, time.perf_counter() - self.started)

    def _poll(self) -> None:
        last = None
        while not self.stop.wait(self.every_s):
            line = self._line()
            if line and line != last:
                log.info("simulate: %s (%.0f s)", line, time.perf_counter() - self.started)
                last = line

    def _line(self) -> str | None:
        tracker = self.sc.statusTracker()
        stages = [s for j in tracker.getJobIdsForGroup(self.group) if (info := tracker.getJobInfo(j))
                  for s in info.stageIds]
        infos = [i for s in sorted(stages) if (i := tracker.getStageInfo(s)) is not None and i.numTasks > 0]
        simulating = [i for i in infos if self.lanes and i.stageId >= self.first_lane_stage
                      and i.numTasks == self.lanes]
        if simulating:
            s = simulating[-1]
            return (f"{s.numCompletedTasks}/{self.lanes} lanes done ({self.total} partitions in all), "
                    f"{s.numActiveTasks} running")
        if infos:
            s = infos[-1]
            return f"reading requests: {s.numCompletedTasks}/{s.numTasks} tasks"
        return None
