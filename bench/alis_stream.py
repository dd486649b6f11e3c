"""Streamed ALIS replay benchmark: the scorecard's ALIS scenario over a window read a chunk at a time from a spill
(sim.scenarios.simulate_chunks, as a policy_scores lane replays a part of 8 M requests or more), against the same
scenario over the window held whole (simulate_requests), each in a fresh process.

    python bench/alis_stream.py [--copies 100 300]

The window: the hplajw week (44,519 requests, two HP C2247A disks) tiled end to end `copies` times, ALIS combined
with realizable plans reorganizing every quarter of the window (the scorecard's interval), as traced, at 20x. Each
size runs streamed (the spill written a copy at a time, so the window is never in memory) and whole, in processes
of their own;
it prints seconds and the process's peak resident memory. Goals: the streamed peak at the largest size at most
1.3x the streamed peak at the smallest (memory follows a chunk and the units, not the window), and the same mean
response as the whole replay. Ends with `streamed_peak_growth=<ratio>`.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))   # ahead of bench/ (the script's own folder), whose sim.py would shadow sim/
sys.path.insert(1, str(REPO / "bench"))

WEEK_S = 7 * 86_400.0


def scenario(copies: int) -> dict[str, object]:
    """The scorecard's ALIS variant: combined, realizable, reorganized every quarter of the window."""
    return {"scenario_id": "alis", "spec": "hp_c2247a", "speedup": 20.0,
            "policy": {"name": "alis", "mode": "combined", "interval_s": copies * WEEK_S / 4}}


def copies_of_the_week(copies: int):  # type: ignore[no-untyped-def]
    """The week's requests `copies` times, each copy a Requests chunk starting a week after the one before."""
    import numpy as np

    from blockheat.libs.readers.srt import read_srt
    from blockheat.sim import Requests

    _, f, _, _ = read_srt(str(REPO / "data/traces/hplajw/ajw.1week.srt"))
    ts = (f["enqueue_s"] * 1_000_000 + f["enqueue_us"]).astype(np.float64)
    ts -= ts[0]
    order = np.argsort(ts, kind="stable")
    week = Requests.build(ts[order], f["disk"][order], f["sector"][order], (-(-f["size_bytes"] // 512))[order],
                          ((f["ioflags"] & 1) == 1)[order])
    for k in range(copies):
        yield Requests(week.arrival_us + k * WEEK_S * 1e6, week.device, week.lbn, week.sectors, week.flags)


def run(copies: int, streamed: bool) -> dict[str, float]:
    """One replay in this process: seconds, peak resident MiB, mean response."""
    from blockheat.sim import Requests, ScenarioConfig, SpilledRequests, simulate_chunks, simulate_requests

    cfg = ScenarioConfig.from_dict(scenario(copies))
    start = time.perf_counter()
    if streamed:
        with SpilledRequests() as spill:
            for chunk in copies_of_the_week(copies):
                spill.append(chunk)
            out = simulate_chunks(spill, spill.facts(), ("0", "1"), "hplajw", cfg)
    else:
        out = simulate_requests(Requests.concat(list(copies_of_the_week(copies))), ("0", "1"), "hplajw", cfg)
    seconds = time.perf_counter() - start
    row = out.result.to_pylist()[0]
    return {"seconds": seconds, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "requests": row["requests"], "mean_response_ms": row["mean_response_ms"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, nargs="+", default=[100, 300],
                    help="window sizes in weeks (default 100 300)")
    ap.add_argument("--one", nargs=2, metavar=("COPIES", "MODE"), help=argparse.SUPPRESS)   # a child's run
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(run(int(args.one[0]), args.one[1] == "streamed")))
        return 0
    run(1, True)                                   # numba caches warmed outside the measured processes
    run(1, False)
    results: dict[tuple[int, str], dict[str, float]] = {}
    for copies in args.copies:
        for mode in ("streamed", "whole"):
            out = subprocess.run([sys.executable, __file__, "--one", str(copies), mode], check=True,
                                 capture_output=True, text=True)
            r = results[copies, mode] = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"{copies:4d} weeks ({r['requests']:,} requests) {mode:8s}: {r['seconds']:7.1f} s, peak "
                  f"{r['peak_mib']:7.0f} MiB, mean response {r['mean_response_ms']:.6f} ms", flush=True)
        same = results[copies, "streamed"]["mean_response_ms"] == results[copies, "whole"]["mean_response_ms"]
        close = abs(results[copies, "streamed"]["mean_response_ms"] / results[copies, "whole"]["mean_response_ms"]
                    - 1) < 1e-12
        st, wh = results[copies, "streamed"], results[copies, "whole"]
        print(f"     streamed / whole: time {st['seconds'] / wh['seconds']:.2f}x, "
              f"peak {st['peak_mib'] / wh['peak_mib']:.2f}x; "
              f"mean response {'equal' if same else 'equal to 1e-12' if close else 'DIFFERENT'}")
    lo, hi = min(args.copies), max(args.copies)
    growth = results[hi, "streamed"]["peak_mib"] / results[lo, "streamed"]["peak_mib"]
    whole = results[hi, "whole"]["peak_mib"] / results[lo, "whole"]["peak_mib"]
    print(f"peak growth from {lo} to {hi} weeks: streamed {growth:.2f}x (goal <= 1.3x), whole {whole:.2f}x")
    print(f"streamed_peak_growth={growth:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
