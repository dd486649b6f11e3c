"""The ALIS layout job's plans and scores from the table files, one task per device: the path jobs.alis_layout
takes for request-sized units (its Spark transforms stay the definition and the fallback).

A task reads its device's requests in time order in parts of about alis_graph.CHUNK_ROWS (DeviceChunks), its
stored units and stored access graphs, gives every request its unit, counts the references per interval and
unit (a task's memory follows the part and those counts, not the device), ages them (eq. 1), finds the runs
of each stored graph, plans each interval's reorganized area with sim.alis.layout.plan_area and scores it on
the next interval's reads (realizable); for the lookahead it builds each interval's own unaged graph (pairs
counted part by part, weights, pruning and runs as libs.table_io.alis_graph does) and plans and scores it on
the same interval. It writes its alis_layout and alis_runs files; the summary rows come back to the driver,
which writes them and commits the three tables.
The Spark path joins every request to its unit (10 M rows) and scores the plans through more joins.

    rows = layout(spark, warehouse, "t1", LayoutParams(...), graph)   # the alis_summary rows
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from blockheat.libs.io.delta_files import replace_from_driver
from blockheat.libs.io.tables import table_target
from blockheat.libs.table_io import alis_graph as GF
from blockheat.libs.table_io.device_pass import Output, Read, device_pass, task_threads, threads_per_task
from blockheat.schemas import alis_layout, alis_runs, alis_summary
from blockheat.sim import plan_area

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TABLES = (alis_layout.TABLE, alis_runs.TABLE)


@dataclass(frozen=True)
class LayoutParams:
    """jobs.alis_layout's options and the stored graphs' parameters (alis_graphs)."""

    interval_us: int
    last: int                    # the last interval with a stored graph
    tau: int
    f: float
    min_length: int
    include_writes: bool
    prefilter_min_refs: int
    graph_share: float
    threshold: float             # the runs' threshold of the mode
    mode: str
    layout: str
    extent_bytes: int
    ra_share: float
    ra_offset: float
    alpha: float
    heat_writes: bool


def _plan(runs: dict[str, np.ndarray] | None, heat: tuple[np.ndarray, np.ndarray] | None, units: dict[str, Any],
          ra_bytes: int, p: LayoutParams) -> dict[str, np.ndarray] | None:
    """plan_layouts' group for one interval: the runs' and the hot units' homes looked up (units dict: sorted
    ids and their offsets and sizes); None when neither side has a row."""
    def home(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Which ids are units (the Spark path's inner join), and their offsets and sizes."""
        if not len(units["unit_id"]):
            return np.zeros(len(ids), bool), ids[:0], ids[:0]
        at = np.minimum(np.searchsorted(units["unit_id"], ids), len(units["unit_id"]) - 1)
        known = units["unit_id"][at] == ids
        return known, units["offset_bytes"][at[known]], units["size_bytes"][at[known]]

    run_side = {k: np.zeros(0, np.int64) for k in ("run_id", "rank", "position", "unit_id", "offset_bytes",
                                                    "size_bytes")}
    if runs is not None and p.mode != "heat" and len(runs["unit_id"]):
        known, offsets, sizes = home(runs["unit_id"])
        run_side = {k: v[known] for k, v in runs.items()}
        run_side["offset_bytes"], run_side["size_bytes"] = offsets, sizes
    hot = {"unit_id": np.zeros(0, np.int64), "heat": np.zeros(0), "offset_bytes": np.zeros(0, np.int64),
           "size_bytes": np.zeros(0, np.int64)}
    if heat is not None and p.mode != "run":
        ids, values = heat
        keep = values > 0
        known, offsets, sizes = home(ids[keep])
        hot = {"unit_id": ids[keep][known], "heat": values[keep][known], "offset_bytes": offsets,
               "size_bytes": sizes}
    if not len(run_side["unit_id"]) and not len(hot["unit_id"]):
        return None
    return plan_area(run_side, hot, ra_bytes=ra_bytes, mode=p.mode, layout=p.layout, extent_bytes=p.extent_bytes)


def _hits(plan: dict[str, np.ndarray] | None, reads: tuple[np.ndarray, np.ndarray]) -> int:
    """Reads (an interval's (unit, reads) pairs) whose unit has a copy in the plan."""
    ids, counts = reads
    if plan is None or not len(ids):
        return 0
    return int(counts[np.isin(ids, plan["unit_id"])].sum())


def device_layout(requests: GF.Requests, units: pa.Table | None, graph: pa.Table | None,
                  p: LayoutParams, spill: GF.SpillSizes | None = None) -> dict[str, Any]:
    """One device: {"plan": alis_layout rows, "runs": alis_runs rows (trace_id, device left out), "summary":
    alis_summary rows as dicts (trace_id, device, mode and layout left out)}. The requests in parts (DeviceChunks)
    give what one table gives: one pass counts each interval's references per unit (reads, and all requests) and
    the space used, the next counts the lookahead's pairs part by part (GF.PairCounter). Memory: a part, the
    units, the counts per interval and unit, up to spill.sum_edges of an interval's lookahead edges (the rest in
    bucket files, as the graph build keeps them; default GF.SPILL), the stored graphs."""
    spill = spill or GF.SPILL
    index = GF.UnitIndex(units)
    unit_table = {c: np.zeros(0, np.int64) for c in ("unit_id", "offset_bytes", "size_bytes")}
    if units is not None:
        order = np.argsort(units.column("unit_id").to_numpy())
        unit_table = {c: np.asarray(units.column(c).to_numpy(), np.int64)[order] for c in unit_table}
    used = 0
    all_counts: dict[int, tuple[np.ndarray, np.ndarray]] = {}      # interval -> sorted (unit, references)
    read_counts: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for part in GF.parts_of(requests, GF.COLUMNS):
        ts, off, size = GF._ints(part, "ts_us", "offset_bytes", "size_bytes")
        if not len(ts):
            continue
        used = max(used, int((off + size).max()))
        unit, interval = index.ids_of(off, size), GF._idiv(ts, p.interval_us)
        valid = unit >= 0                                     # unit_refs joins the requests to their units
        reads = valid & GF._is_read(part)
        GF.interval_unit_counts([(interval[valid], unit[valid])], all_counts)
        GF.interval_unit_counts([(interval[reads], unit[reads])], read_counts)
    heat_counts = all_counts if p.heat_writes else read_counts
    none = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    ra_bytes, ra_start = math.floor(used * p.ra_share), math.floor(used * p.ra_offset)

    def counts_of(i: int) -> tuple[np.ndarray, np.ndarray]:
        return heat_counts.get(i, none)

    def reads_of(i: int) -> tuple[np.ndarray, np.ndarray]:
        return read_counts.get(i, none)

    # Realizable: aged heat up to each interval, the stored graph's runs, scored on the next interval's reads.
    plans, found, summary = [], [], []
    use_runs = p.mode != "heat"
    stored: dict[int, tuple[np.ndarray, ...]] = {}
    if graph is not None and graph.num_rows:
        g_int = graph.column("interval_id").to_numpy()
        edges = [np.asarray(graph.column(c).to_numpy()) for c in ("src_unit", "dst_unit", "weight")]
        if len(g_int) > 1 and not (g_int[1:] >= g_int[:-1]).all():      # stored interval after interval: sorted
            g_order = np.argsort(g_int, kind="stable")
            g_int, edges = g_int[g_order], [e[g_order] for e in edges]
        for i, a, b in zip(*GF._bounds(g_int), strict=True):
            stored[int(i)] = tuple(e[a:b] for e in edges)
    run_sets = {i: GF.run_members(*edges, p) for i, edges in stored.items()} if use_runs else {}
    for i, r in sorted(run_sets.items()):
        found.append(_table({"interval_id": np.full(len(r["unit_id"]), i, np.int64), **r}))
    previous = None
    heat_by_interval = {}
    for i in range(p.last + 1):
        ids, counts = counts_of(i)
        src, _, aged = GF._age((ids, np.zeros(len(ids), np.int64), counts.astype(np.float64)), previous, p.alpha)
        previous = (src, np.zeros(len(src), np.int64), aged)
        heat_by_interval[i] = (src, aged)
    plan_by_interval = {}
    for i in sorted(set(heat_by_interval) | set(run_sets)):
        plan = _plan(run_sets.get(i), heat_by_interval.get(i), unit_table, ra_bytes, p)
        if plan is not None:
            plan_by_interval[i] = plan
            m = len(plan["unit_id"])
            plans.append(pa.table({
                "interval_id": pa.array(np.full(m, i, np.int64)),
                "region": pa.array(plan["region"].tolist(), pa.string()),
                "run_id": pa.array(plan["run_id"], pa.int64(), mask=plan["run_id"] < 0),
                "unit_id": pa.array(plan["unit_id"], pa.int64()),
                "home_offset_bytes": pa.array(plan["home_offset_bytes"], pa.int64()),
                "size_bytes": pa.array(plan["size_bytes"], pa.int64()),
                "ra_offset_bytes": pa.array(plan["ra_offset_bytes"], pa.int64()),
                "ra_address_bytes": pa.array(plan["ra_offset_bytes"] + ra_start, pa.int64())}))

    # Lookahead: interval N + 1's own raw counts and unaged graph, scored on its own reads (row N).
    budget = math.floor(used * p.graph_share)
    la_runs: dict[int, dict[str, np.ndarray]] = {}
    if use_runs:
        def chosen_of(part: pa.Table, ts: np.ndarray, interval: np.ndarray) -> np.ndarray:
            chosen = (interval >= 1) & (interval <= p.last)
            return chosen if p.include_writes else chosen & GF._is_read(part)

        def weighed(src: np.ndarray, dst: np.ndarray, pairs: np.ndarray, closeness: np.ndarray,
                    _previous: Any) -> GF.Edges:
            return src, dst, GF.weigh(pairs, closeness, p.tau, p.f)          # unaged: no previous graph

        def runs_of(ended: Any) -> None:
            for i, counts in ended:
                la_runs[i] = GF.run_members(*GF.pruned_graph(counts, weighed, None, budget, spill), p)

        n_units = int(unit_table["unit_id"].max()) + 1 if len(unit_table["unit_id"]) else 1
        with GF.spilling_counter(p.tau, n_units, spill) as counter:
            for interval, refs in GF.references(GF.parts_of(requests, GF.COLUMNS, p.interval_us), index,
                                                p.interval_us, chosen_of, p.prefilter_min_refs,
                                                all_counts if p.include_writes else read_counts):
                runs_of(counter.add(interval, refs))
            runs_of(counter.close())
    empty = np.zeros(0, np.int64)
    no_runs = GF.run_members(empty, empty, np.zeros(0), p) if use_runs else None
    lookahead = {i - 1: _hits(_plan(la_runs.get(i, no_runs) if use_runs else None, counts_of(i), unit_table,
                                    ra_bytes, p), reads_of(i))
                 for i in range(1, p.last + 1)}

    for i in range(p.last + 1):
        plan = plan_by_interval.get(i)
        run_rows = plan["region"] == "run" if plan is not None else np.zeros(0, bool)
        row = {"interval_id": i, "storage_used_bytes": used, "ra_start_bytes": ra_start, "ra_bytes": ra_bytes,
               "runs_placed": len(np.unique(plan["run_id"][run_rows])) if plan is not None else 0,
               "run_copies": int(run_rows.sum()), "heat_copies": int((~run_rows).sum()),
               "bytes_placed": int(plan["size_bytes"].sum()) if plan is not None else 0,
               "next_reads": None, "realizable_reads": None, "lookahead_reads": None,
               "realizable_share": None, "lookahead_share": None}
        if i < p.last:
            nxt = reads_of(i + 1)
            n_next = int(nxt[1].sum())
            row["next_reads"] = n_next
            row["realizable_reads"] = _hits(plan, nxt)
            row["lookahead_reads"] = lookahead.get(i, 0)
            if n_next:
                row["realizable_share"] = row["realizable_reads"] / n_next
                row["lookahead_share"] = row["lookahead_reads"] / n_next
        summary.append(row)
    empty_plan = pa.schema([f for f in alis_layout.ARROW_SCHEMA if f.name not in ("trace_id", "device")])
    empty_runs = pa.schema([f for f in alis_runs.ARROW_SCHEMA if f.name not in ("trace_id", "device")])
    return {"plan": pa.concat_tables(plans) if plans else empty_plan.empty_table(),
            "runs": pa.concat_tables(found) if found else empty_runs.empty_table(), "summary": summary}


def _table(columns: dict[str, np.ndarray]) -> pa.Table:
    return pa.table({k: pa.array(np.asarray(v, np.int64)) for k, v in columns.items()})


def layout(spark: SparkSession, warehouse: Path, trace_id: str, p: LayoutParams) -> list[dict[str, Any]]:
    """Plan and score every interval, write alis_layout, alis_runs (not for mode heat) and alis_summary (one
    replace of the trace each). Returns the alis_summary rows by (device, interval_id). Unsupported (nothing
    written) when the files cannot be read directly."""
    requests = GF.request_files(spark, warehouse, trace_id)
    units = GF._stored(spark, warehouse, trace_id, "reorg_units")
    graphs = GF._stored(spark, warehouse, trace_id, "access_graph")
    devices = [(d, {"requests": requests.files[d], "units": units.get(d, []), "graph": graphs.get(d, [])})
               for d in requests.by_size()]
    reads = {"requests": Read(GF.COLUMNS, chunk_rows=GF.CHUNK_ROWS),
             "units": Read(["unit_id", "offset_bytes", "size_bytes"]),
             "graph": Read(["interval_id", "src_unit", "dst_unit", "weight"])}
    where = {"trace_id": trace_id}
    sizes = dataclasses.replace(GF.SPILL, threads=threads_per_task(spark, len(devices)))  # the tasks get the driver's
    names = TABLES if p.mode != "heat" else (alis_layout.TABLE,)
    outputs = {name: Output(table_target(spark, warehouse, name).for_write(), where) for name in names}

    def layout_device(device: str, rows: dict[str, pa.Table | None]) -> tuple[dict[str, pa.Table], list[dict]]:
        out = device_layout(rows["requests"], rows["units"], rows["graph"], p,
                            dataclasses.replace(sizes, threads=task_threads(sizes.threads)))
        tables = {alis_layout.TABLE: GF.keyed(out["plan"], trace_id, device)}
        if alis_runs.TABLE in outputs:
            tables[alis_runs.TABLE] = GF.keyed(out["runs"], trace_id, device)
        return tables, out["summary"]

    laid = device_pass(spark, devices, layout_device, read=reads, outputs=outputs, label=f"alis layout {trace_id}")
    out = [{"device": device, **row} for device, summary in laid.extras.items() for row in summary]
    rows = sorted(({"trace_id": trace_id, "device": r["device"], "mode": p.mode, "layout": p.layout,
                    **{k: v for k, v in r.items() if k != "device"}}
                   for r in out), key=lambda r: (r["device"], r["interval_id"]))
    rows = [{c: r[c] for c in alis_summary.COLUMNS} for r in rows]
    table = pa.Table.from_pylist(rows, schema=alis_summary.ARROW_SCHEMA)
    replace_from_driver(spark, table_target(spark, warehouse, alis_summary.TABLE), where, table)
    return rows
