"""Spark application: ALIS units, aged access graphs and runs of one trace (`reorg_units`,
`access_graph`, `alis_runs`, `alis_graphs`), built by libs.table_io.alis_build.

Incremental like the aged heat counts: interval N ages interval N-1's pruned graph. A full build
walks the intervals from 0 and replaces the trace's rows; --from-interval N reads interval N-1's
graph from the table and replaces intervals N and later only.

--interval-index N (the nightly DAG) builds exactly interval N from what interval N-1 left in the tables
and the requests up to the end of interval N: the units are extended with those first referenced in N
(existing ids kept, libs.alis.units.extend_reorg_units), the size budget is the storage used by then,
and only interval N's rows are replaced (N = 0 starts the chain afresh: the trace's units, graphs and
runs are replaced). Later requests in the table change nothing, so a backfill over days whose files
all landed gives the same tables as the nightly runs did with each day's files. Unit ids then follow
first use, not address order as in a full build, and the budget grows with the storage used, so a nightly
chain can differ from a full build of the same days where pruning or ties between equal weights decide.

--no-runs builds the units and graphs only and leaves alis_runs alone: the nightly DAG's alis_layout, next,
finds the runs of its mode's threshold in every stored graph and writes them.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence

from blockheat.libs.io.session import SparkConfig, build_session
from blockheat.libs.table_io.alis_build import GraphOptions, GraphParamsError, run

#: The job's options, errors and run, as the `blockheat graph` command and the tests take them.
__all__ = ["GraphOptions", "GraphParamsError", "add_arguments", "main", "options_from_args", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of this job and of `blockheat graph`."""
    parser.add_argument("trace_id", metavar="TRACE_ID", help="an ingested trace")
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
    parser.add_argument("--no-runs", dest="runs", action="store_false",
                        help="build the graphs only and leave alis_runs alone (the nightly DAG: alis_layout, next, "
                             "writes the runs of its mode's threshold)")
    parser.add_argument("--chunk", type=float, default=60.0, help="time chunk of the parallel build, s (default 60)")
    parser.add_argument("--from-interval", type=int, default=0,
                        help="rebuild from this interval on, ageing the stored graph of the one before")
    parser.add_argument("--interval-index", type=int, default=None, metavar="N",
                        help="build exactly interval N from the stored N-1 and the requests up to N's end "
                             "(nightly mode; 0 starts afresh)")
    return parser


def options_from_args(args: argparse.Namespace) -> GraphOptions:
    """Parsed add_arguments options -> GraphOptions (bad values: ValueError naming the value)."""
    return GraphOptions(
        args.trace_id, tau=args.tau, f=args.f, beta=args.beta, interval_us=_us(args.interval, "--interval"),
        unit_bytes=args.unit_bytes, include_writes=args.include_writes, graph_share=args.graph_share,
        prefilter_min_refs=args.prefilter, threshold=args.threshold, min_run_length=args.min_run,
        chunk_us=_us(args.chunk, "--chunk"), from_interval=args.from_interval,
        interval_index=args.interval_index, runs=args.runs)


def _us(seconds: float, name: str) -> int:
    if seconds <= 0:
        raise ValueError(f"{name} must be > 0 seconds, got {seconds:g}")
    return round(seconds * 1e6)


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit entry point."""
    opts = options_from_args(add_arguments(argparse.ArgumentParser(prog="alis_graph", description=__doc__))
                             .parse_args(argv))
    cfg = SparkConfig.from_env("alis_graph")
    run(build_session(cfg), cfg, opts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
