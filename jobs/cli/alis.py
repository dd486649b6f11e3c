"""`blockheat graph` and `blockheat alis`: ALIS access graphs and runs, then the reorganized-area
layout, each with a per-device summary."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from jobs.cli.common import checked, print_table, spark_session


def _mib(n: int | None) -> str:
    """Bytes in KiB, MiB or GiB, whichever reads best."""
    if n is None:
        return "-"
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):,.1f} {unit}"
    return f"{n / 1024:,.1f} KiB"


def _share(hits: int, reads: int) -> str:
    return "-" if not reads else f"{hits / reads:.1%}"


def _graph_arguments(parser: argparse.ArgumentParser) -> None:
    from jobs.alis_graph import add_arguments  # lazy: the job (pyspark) loads only for `graph`

    add_arguments(parser)


def _layout_arguments(parser: argparse.ArgumentParser) -> None:
    from jobs.alis_layout import add_arguments  # lazy: the job (pyspark) loads only for `alis`

    add_arguments(parser)


def cmd_graph(args: argparse.Namespace) -> int:
    from jobs.alis_graph import options_from_args, run  # lazy: the job (pyspark) loads only for `graph`

    opts = checked(options_from_args, args)
    spark, cfg = spark_session(args, f"graph {opts.trace_id}")
    summary = run(spark, cfg, opts)
    out = sys.stdout
    first, last = summary.intervals[0], summary.intervals[-1]
    unit = "request extents" if not opts.unit_bytes else f"{opts.unit_bytes}-byte units"
    out.write(f"\nALIS graphs of {opts.trace_id}: intervals {first}..{last} of {opts.interval_us / 1e6:g} s, "
              f"{unit}, tau {opts.tau}, f {opts.f:g}, beta {opts.beta:g}, "
              f"{'reads and writes' if opts.include_writes else 'reads'}\n\n")
    rows = [{"device": d["device"], "units": d["units"], "refs": d["graph_refs"], "edges": d["last_edges"],
             "graph": _mib(d["last_graph_bytes"]), "budget": _mib(d["budget_bytes"]), "runs": d["last_runs"],
             "run_units": d["last_run_units"], "runs_all": d["runs"]} for d in summary.per_device]
    print_table(rows, ["device", "units", "refs", "edges", "graph", "budget", "runs", "run_units", "runs_all"])
    out.write(f"\nedges, graph, runs, run_units: interval {last}'s aged, pruned graph; runs_all: every interval "
              f"(threshold {opts.threshold:g}, minimum length {opts.min_length}); refs: graph references\n"
              "tables: reorg_units, access_graph, alis_runs, alis_graphs; next: blockheat alis "
              f"{opts.trace_id}\n")
    return 0


def cmd_alis(args: argparse.Namespace) -> int:
    from jobs.alis_layout import options_from_args, run  # lazy: the job (pyspark) loads only for `alis`

    opts = checked(options_from_args, args)
    spark, cfg = spark_session(args, f"alis {opts.trace_id}")
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
            "device": device, "ra": _mib(final["ra_bytes"]), "plans": len(plans),
            "runs": final["runs_placed"], "run_copies": final["run_copies"], "heat_copies": final["heat_copies"],
            "placed": _mib(final["bytes_placed"]), "next_reads": reads,
            "realizable": _share(sum(p["realizable_reads"] for p in scored), reads),
            "lookahead": _share(sum(p["lookahead_reads"] for p in scored), reads),
        })
    out = sys.stdout
    out.write(f"\nALIS layout of {opts.trace_id}: mode {opts.mode}, layout {opts.layout}, area {opts.ra_share:g} "
              f"of the storage used at {opts.ra_offset:g} into it, run threshold {opts.run_threshold:g}\n\n")
    print_table(table, ["device", "ra", "plans", "runs", "run_copies", "heat_copies", "placed", "next_reads",
                        "realizable", "lookahead"])
    out.write("\nruns, copies, placed: the last plan (the directory to load now); realizable / lookahead: share of "
              "each next interval's reads whose data is in the area, planned from history / from that interval "
              "itself, over all intervals\ntables: alis_layout, alis_summary (per interval), alis_runs\n")
    return 0


def add_commands(sub: Any) -> None:
    """Register `graph` and `alis` on the blockheat parser."""
    sub.add_parser("graph", help="ALIS units, aged access graphs and runs of a trace").defer(
        _graph_arguments).set_defaults(func=cmd_graph)
    sub.add_parser("alis", help="ALIS reorganized-area layout of a trace (run graph first)").defer(
        _layout_arguments).set_defaults(func=cmd_alis)
