"""Simulator benchmark: the hplajw week replayed open loop on its two HP 335H disks (spec built from the
trace header, detailed disk model), tiled end to end to get a few million requests, on one core; and DiskSim's
HP C2247A validation trace replayed as its validation does (closed loop, one request outstanding, the recorded
idle gap after each completion) on the shipped hp_c2247a spec (DiskSim's parameters: segmented read-ahead
cache, bus protocol), tiled the same way.

    python bench/sim.py [--copies 100] [--c2247a-copies 445] [--repeats 3]

Prints requests per second (best of the repeats, compile excluded) for FCFS and C-LOOK queues and for the
C2247A replay, the ratio to the 240 thousand per second quoted for a widely used C disk simulator on the
hplajw trace (a reference figure, not measured here), the simulator's memory per request (peak of numpy
allocations traced while building the columns, running and summarising, over the number of requests), and
ends with `requests_per_second_per_core=<number>` (the FCFS figure).
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from blockheat.libs.readers.srt import read_srt
from blockheat.sim import (
    DiskArray,
    Requests,
    SimConfig,
    Simulation,
    closed_loop_simulation,
    load_spec,
    read_validation_trace,
)
from blockheat.sim import spec_from_srt_header as from_srt_header

TRACE = Path(__file__).resolve().parents[1] / "data/traces/hplajw/ajw.1week.srt"
C2247A_TRACE = Path(__file__).resolve().parents[1] / "data/traces/disksim-validation/hp_c2247a.trace"
REFERENCE_C_SIMULATOR = 240_000.0


def tiled_columns(copies: int) -> dict[str, np.ndarray]:
    """The trace's columns repeated `copies` times, each copy one second after the previous one ends."""
    header, f, _, _ = read_srt(str(TRACE))
    ts = (f["enqueue_s"] * 1_000_000 + f["enqueue_us"]).astype(np.float64)
    shift = float(ts[-1] - ts[0]) + 1e6
    return {
        "arrival_us": (ts[None, :] + shift * np.arange(copies)[:, None]).ravel(),
        "device": np.tile(f["disk"], copies),
        "lbn": np.tile(f["sector"], copies),
        "sectors": np.tile(-(-f["size_bytes"] // header.disks[0].sector_size), copies),
        "is_read": np.tile((f["ioflags"] & 1) == 1, copies),
        "header": header,  # type: ignore[dict-item]
    }


def one_run(cols: dict[str, np.ndarray], scheduler: str, *, own_columns: bool = False) -> tuple[float, int, object]:
    """(run seconds, requests, result). own_columns: build the simulator's columns as fresh copies (so a
    memory trace started before the call sees them)."""
    spec = from_srt_header(cols["header"], 0)
    take = (lambda a, t: np.array(a, dtype=t)) if own_columns else (lambda a, t: np.asarray(a, dtype=t))
    req = Requests.build(take(cols["arrival_us"], np.float64), take(cols["device"], np.int32),
                         take(cols["lbn"], np.int64), take(cols["sectors"], np.int32), cols["is_read"])
    sim = Simulation(spec, DiskArray(2, scheduler=scheduler), req, SimConfig(), np.random.default_rng(0),
                     device_sectors=[spec.capacity_sectors] * 2)
    start = time.perf_counter()
    status = sim.run()
    elapsed = time.perf_counter() - start
    assert status.finished
    return elapsed, len(req), sim.result()


def c2247a_run(copies: int) -> tuple[float, int, object]:
    """(run seconds, requests, result) of the C2247A validation replay (sim.validate's) with its trace `copies` times
    end to end, on hp_c2247a."""
    sim = closed_loop_simulation(load_spec("hp_c2247a"), read_validation_trace(C2247A_TRACE), copies=copies)
    start = time.perf_counter()
    status = sim.run()
    elapsed = time.perf_counter() - start
    assert status.finished
    return elapsed, len(sim.requests), sim.result()


def memory_per_request(cols: dict[str, np.ndarray]) -> float:
    """Peak bytes of numpy allocations (the simulator's request columns, engine state, outputs and the
    result's order statistics) per request; the decoded trace it is built from is not counted."""
    tracemalloc.start()
    _, n, _ = one_run(cols, "fcfs", own_columns=True)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=100, help="copies of the 44,519-request week (default 100)")
    ap.add_argument("--c2247a-copies", type=int, default=445,
                    help="copies of the 9,999-request C2247A validation trace (default 445; 0: no C2247A row)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    small = tiled_columns(1)
    one_run(small, "fcfs")                  # compile (or load the numba cache) outside the timing
    one_run(small, "clook")
    if args.c2247a_copies > 0:
        c2247a_run(1)
    cols = tiled_columns(args.copies)
    rates = {}
    for scheduler in ("fcfs", "clook"):
        best = min(one_run(cols, scheduler)[0] for _ in range(args.repeats))
        rates[scheduler] = len(cols["arrival_us"]) / best
        print(f"{scheduler:5s}: {len(cols['arrival_us']):,} requests in {best:.3f} s = "
              f"{rates[scheduler] / 1e6:.2f} M requests/s (x{rates[scheduler] / REFERENCE_C_SIMULATOR:.1f} the "
              f"quoted 240 k/s of a C simulator; goal >= 1 M/s)")
    if args.c2247a_copies > 0:
        runs = [c2247a_run(args.c2247a_copies) for _ in range(args.repeats)]
        best = min(elapsed for elapsed, _, _ in runs)
        _, n_c, cres = runs[0]
        print(f"c2247a: {n_c:,} requests in {best:.3f} s = {n_c / best / 1e6:.2f} M requests/s (closed loop, one "
              f"outstanding; mean response {cres.mean_response_ms:.3f} ms)")  # type: ignore[attr-defined]
    _, n, res = one_run(cols, "fcfs")
    print(f"result check: {res.requests:,} requests, mean response {res.mean_response_ms:.2f} ms, "  # type: ignore[attr-defined]
          f"mean service {res.mean_service_ms:.2f} ms")  # type: ignore[attr-defined]
    per_req = memory_per_request(cols)
    print(f"memory: {per_req:.1f} bytes per request (peak traced numpy allocations / {n:,} requests; goal <= 64)")
    print(f"max RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    print(f"requests_per_second_per_core={rates['fcfs']:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
