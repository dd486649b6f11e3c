"""`blockheat graph` and `blockheat alis`: ALIS access graphs and runs, then the reorganized-area
layout, each with a per-device summary."""
from __future__ import annotations

import argparse
from typing import Any

from blockheat.jobs.cli.common import add_command, add_output_options, checked, output, spark_session
from blockheat.jobs.cli.output import SHARE


def _share(hits: int, reads: int) -> float | None:
    return None if not reads else hits / reads


def _graph_arguments(parser: argparse.ArgumentParser) -> None:
    from blockheat.jobs.alis_graph import add_arguments  # lazy: the job (pyspark) loads only for `graph`

    add_arguments(parser)
    add_output_options(parser)


def _layout_arguments(parser: argparse.ArgumentParser) -> None:
    from blockheat.jobs.alis_layout import add_arguments  # lazy: the job (pyspark) loads only for `alis`

    add_arguments(parser)
    add_output_options(parser)


def cmd_graph(args: argparse.Namespace) -> int:
    from blockheat.jobs.alis_graph import options_from_args, run  # lazy: the job (pyspark) loads only for `graph`

    opts = checked(options_from_args, args)
    spark, cfg = spark_session(args, f"graph {opts.trace_id}", trace_id=opts.trace_id)
    summary = run(spark, cfg, opts)
    out = output(args)
    first, last = summary.intervals[0], summary.intervals[-1]
    unit = "request extents" if not opts.unit_bytes else f"{opts.unit_bytes}-byte units"
    out.note(f"\nALIS graphs of {opts.trace_id}: intervals {first}..{last} of {opts.interval_us / 1e6:g} s, "
             f"{unit}, tau {opts.tau}, f {opts.f:g}, beta {opts.beta:g}, "
             f"{'reads and writes' if opts.include_writes else 'reads'}\n")
    rows = [{"device": d["device"], "units": d["units"], "refs": d["graph_refs"], "edges": d["last_edges"],
             "graph_bytes": d["last_graph_bytes"], "budget_bytes": d["budget_bytes"], "runs": d["last_runs"],
             "run_units": d["last_run_units"], "runs_all": d["runs"]} for d in summary.per_device]
    columns = ["device", "units", "refs", "edges", "graph_bytes", "budget_bytes"]
    out.rows(rows, [*columns, "runs", "run_units", "runs_all"] if opts.runs else columns, name="devices")
    if opts.runs:
        out.note(f"\nedges, graph, runs, run_units: interval {last}'s aged, pruned graph; runs_all: every interval "
                 f"(threshold {opts.threshold:g}, minimum length {opts.min_length}); refs: graph references\n"
                 "tables: reorg_units, access_graph, alis_runs, alis_graphs; next: blockheat alis "
                 f"{opts.trace_id}")
    else:
        out.note(f"\nedges, graph: interval {last}'s aged, pruned graph; refs: graph references; no runs found "
                 f"(--no-runs)\ntables: reorg_units, access_graph, alis_graphs; next: blockheat alis {opts.trace_id} "
                 "(it finds the runs and writes alis_runs)")
    return out.render()


def cmd_alis(args: argparse.Namespace) -> int:
    from blockheat.jobs.alis_layout import options_from_args, run  # lazy: the job (pyspark) loads only for `alis`

    opts = checked(options_from_args, args)
    spark, cfg = spark_session(args, f"alis {opts.trace_id}", trace_id=opts.trace_id)
    rows = run(spark, cfg, opts)
    by_device: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_device.setdefault(r["device"], []).append(r)
    table = []
    for device, plans in sorted(by_device.items()):
        final = plans[-1]
        scored = [p for p in plans if p["next_reads"] is not None]
        reads = sum(p["next_reads"] for p in scored)
        table.append({
            "device": device, "ra_bytes": final["ra_bytes"], "plans": len(plans),
            "runs": final["runs_placed"], "run_copies": final["run_copies"], "heat_copies": final["heat_copies"],
            "placed_bytes": final["bytes_placed"], "next_reads": reads,
            "realizable": _share(sum(p["realizable_reads"] for p in scored), reads),
            "lookahead": _share(sum(p["lookahead_reads"] for p in scored), reads),
        })
    out = output(args)
    out.note(f"\nALIS layout of {opts.trace_id}: mode {opts.mode}, layout {opts.layout}, area {opts.ra_share:g} "
             f"of the storage used at {opts.ra_offset:g} into it, run threshold {opts.run_threshold:g}\n")
    out.rows(table, ["device", "ra_bytes", "plans", "runs", "run_copies", "heat_copies", "placed_bytes", "next_reads",
                     "realizable", "lookahead"], name="devices",
             units={"realizable": SHARE, "lookahead": SHARE})
    out.note("\nruns, copies, placed: the last plan (the directory to load now); realizable / lookahead: share of "
             "each next interval's reads whose data is in the area, planned from history / from that interval "
             "itself, over all intervals\ntables: alis_layout, alis_summary (per interval), alis_runs")
    return out.render()


def add_commands(sub: Any) -> None:
    """Register `graph` and `alis` on the blockheat parser."""
    add_command(sub, "graph", "ALIS units, aged access graphs and runs of a trace",
                "blockheat graph hplajw --tau 9 --beta 0.8").defer(_graph_arguments).set_defaults(func=cmd_graph)
    add_command(sub, "alis", "ALIS reorganized-area layout of a trace (run graph first)",
                "blockheat alis hplajw --mode run").defer(_layout_arguments).set_defaults(func=cmd_alis)
