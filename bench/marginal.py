"""The benchmarks' marginal rate: a run timed on traces of M and N requests gives (N - M) / (t(N) - t(M)), which
leaves out a run's fixed cost (its session's jobs, the workers' start). With it, the options and the traces of the
--job benchmarks (bench/heat.py, bench/graph.py), which time a command on generated request traces (loaded by
bench/heat.py's load_job_traces in a child process)."""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

WARM = 200_000     # requests of the warm-up trace


def add_job_options(parser: argparse.ArgumentParser, command: str, reference: str) -> None:
    """--job, --marginal-from M and the hidden --prepare-job (the child that loads the traces)."""
    parser.add_argument("--job", action="store_true",
                        help=f"time the `blockheat {command}` command's run against {reference} (marginal rate)")
    parser.add_argument("--marginal-from", type=float, default=None, metavar="M",
                        help="with --job: the smaller trace (million requests) of the marginal rate")
    parser.add_argument("--prepare-job", action="store_true", help=argparse.SUPPRESS)


def job_traces(args: argparse.Namespace) -> dict[str, int]:
    """--job's traces and their requests: warm, base (--marginal-from) and bench (--millions)."""
    if args.marginal_from is None or not 0 < args.marginal_from < args.millions:
        raise SystemExit("--job needs --marginal-from M with 0 < M < --millions")
    return {"warm": WARM, "base": int(args.marginal_from * 1_000_000), "bench": int(args.millions * 1_000_000)}


def prepare(script: str, args: argparse.Namespace, work: Path) -> dict[str, int]:
    """Runs `script --prepare-job` (the child loads the traces: the generator's memory goes with it); the traces."""
    traces = job_traces(args)
    subprocess.run([sys.executable, script, "--prepare-job", "--millions", str(args.millions), "--marginal-from",
                    str(args.marginal_from), "--workdir", str(work)], check=True)
    return traces


def rate(n: int, times: list[float], m: int | None, base_times: list[float], label: str) -> float:
    """Requests per second, printed: the marginal from m to n requests when m is given (medians), else n over the
    median."""
    whole = n / statistics.median(times)
    if not m:
        print(f"{label}: {whole / 1e6:.3f} M req/s at {n:,} requests ({', '.join(f'{t:.2f}' for t in times)} s)")
        return whole
    slope = (n - m) / (statistics.median(times) - statistics.median(base_times))
    print(f"{label}: marginal {slope / 1e6:.3f} M req/s from {m:,} to {n:,} requests (runs "
          f"{', '.join(f'{t:.2f}' for t in base_times)} s and {', '.join(f'{t:.2f}' for t in times)} s; whole "
          f"{whole / 1e6:.3f} M req/s)")
    return slope


def rates(times: dict[str, dict[str, list[float]]], traces: dict[str, int], what: str) -> dict[str, float]:
    """Each engine's marginal rate from its base and bench runs (times[engine]["base" | "bench"]), printed."""
    return {engine: rate(traces["bench"], runs["bench"], traces["base"], runs["base"], f"{engine:9s} {what}")
            for engine, runs in times.items()}
