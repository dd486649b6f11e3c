"""`blockheat graph` and `blockheat alis`: ALIS access graphs and runs, then the reorganized-area
layout, each with a per-device summary."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from jobs.cli.main import UsageError, print_table, spark_session


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


LAYOUTS = ("sequential", "packed", "heat", "organ-pipe")  # libs.alis.layout.LAYOUTS (kept light to import)
MODES = ("heat", "run", "combined")


def graph_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of `blockheat graph` (also the spark-submit entry point's, jobs/alis_graph.py)."""
    parser.add_argument("trace_id", metavar="TRACE_ID")
    parser.add_argument("--tau", type=int, default=9, help="context size (default 9)")
    parser.add_argument("--f", type=float, default=1.0, help="share of edge weight given to distance (default 1)")
    parser.add_argument("--beta", type=float, default=0.8, help="edge-weight age factor (0.8 server, 0.1 PC)")
    parser.add_argument("--interval", type=float, default=86_400.0, help="reorganization interval, s (default 1 day)")
    parser.add_argument("--unit-bytes", type=int, default=0,
                        help="fixed-size units of this many bytes (default 0: one unit per request extent)")
    parser.add_argument("--include-writes", action="store_true", help="writes build the graph too")
    parser.add_argument("--graph-share", type=float, default=0.005,
                        help="graph size budget, share of the storage used (default 0.005)")
    parser.add_argument("--prefilter", type=int, default=0, metavar="N",
                        help="leave out units referenced fewer than N times in their interval (default off)")
    parser.add_argument("--threshold", type=float, default=0.1, help="run edge-weight threshold (default 0.1)")
    parser.add_argument("--min-run", type=int, default=None, help="minimum run length (default tau)")
    parser.add_argument("--chunk", type=float, default=60.0, help="time chunk of the parallel build, s (default 60)")
    parser.add_argument("--from-interval", type=int, default=0,
                        help="rebuild from this interval on, ageing the stored graph of the one before")
    parser.add_argument("--interval-index", type=int, default=None, metavar="N",
                        help="build exactly interval N from the stored N-1 and the requests up to N's end "
                             "(nightly mode; 0 starts afresh)")
    return parser


def graph_options(args: argparse.Namespace) -> Any:
    """Parsed `graph` arguments -> jobs.alis_graph.GraphOptions (bad values: UsageError)."""
    from jobs.alis_graph import GraphOptions

    try:
        return GraphOptions(
            args.trace_id, tau=args.tau, f=args.f, beta=args.beta, interval_us=_us(args.interval, "--interval"),
            unit_bytes=args.unit_bytes, include_writes=args.include_writes, graph_share=args.graph_share,
            prefilter_min_refs=args.prefilter, threshold=args.threshold, min_run_length=args.min_run,
            chunk_us=_us(args.chunk, "--chunk"), from_interval=args.from_interval,
            interval_index=args.interval_index)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def layout_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of `blockheat alis` (also jobs/alis_layout.py's)."""
    parser.add_argument("trace_id", metavar="TRACE_ID")
    parser.add_argument("--ra-share", type=float, default=0.15,
                        help="reorganized area size, share of the storage used (default 0.15)")
    parser.add_argument("--ra-offset", type=float, default=0.30,
                        help="reorganized area start, share of the storage used (default 0.30)")
    parser.add_argument("--layout", choices=LAYOUTS, default="sequential", help="heat-region layout")
    parser.add_argument("--mode", choices=MODES, default="combined", help="what fills the area (default combined)")
    parser.add_argument("--extent-bytes", type=int, default=1 << 30, help="packed-extents extent size (default 1 GiB)")
    parser.add_argument("--alpha", type=float, default=0.8, help="reference-count age factor (default 0.8)")
    parser.add_argument("--heat-reads-only", action="store_true", help="count only reads for heat (default: all)")
    parser.add_argument("--threshold", type=float, default=None,
                        help="run edge-weight threshold (default 0.1, or 0.4 with --mode combined)")
    return parser


def layout_options(args: argparse.Namespace) -> Any:
    """Parsed `alis` arguments -> jobs.alis_layout.LayoutOptions (bad values: UsageError)."""
    from jobs.alis_layout import LayoutOptions

    try:
        return LayoutOptions(args.trace_id, mode=args.mode, layout=args.layout, ra_share=args.ra_share,
                             ra_offset=args.ra_offset, extent_bytes=args.extent_bytes, alpha=args.alpha,
                             heat_writes=not args.heat_reads_only, threshold=args.threshold)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def _us(seconds: float, name: str) -> int:
    if seconds <= 0:
        raise UsageError(f"{name} must be > 0 seconds, got {seconds:g}")
    return round(seconds * 1e6)


def cmd_graph(args: argparse.Namespace) -> int:
    from jobs.alis_graph import run

    opts = graph_options(args)
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
    from jobs.alis_layout import run

    opts = layout_options(args)
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
    graph_parser(sub.add_parser("graph", help="ALIS units, aged access graphs and runs of a trace")
                 ).set_defaults(func=cmd_graph)
    layout_parser(sub.add_parser("alis", help="ALIS reorganized-area layout of a trace (run graph first)")
                  ).set_defaults(func=cmd_alis)
