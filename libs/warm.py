"""Compiles every numba loop of blockheat into numba's on-disk cache, once per environment (`make venv` runs
it): otherwise each process that first calls a loop compiles it (seconds of CPU each, the test workers and
every Spark Python worker at once on a cold cache). Each module's compile_all calls its loops with the argument
types the jobs pass, writable arrays and the read-only ones Arrow columns give (numba compiles those again).

    python -m libs.warm
"""
from __future__ import annotations

import time

import numpy as np


def compile_all(only: tuple[str, ...] | None = None) -> dict[str, float]:
    """Runs every module's warm-up (or the named ones); returns the seconds each took."""
    from libs.alis import warm as alis_warm
    from libs.readers.srt import find_record_offsets
    from libs.transforms import heat_kernels, profile_kernels, tracking_kernels
    from sim import warm as sim_warm

    def srt() -> None:      # the record walk (records of two sizes), over a memory map's read-only bytes
        body = sim_warm.frozen(np.array([0, 0, 0, 8, 1, 1, 1, 1, 0, 0, 0, 12, *[2] * 8], np.uint8))
        offsets, stop = find_record_offsets(body)
        assert (offsets.tolist(), stop) == ([0, 8], 20)

    steps = {"profile": profile_kernels.compile_all, "tracking": tracking_kernels.compile_all,
             "heat": heat_kernels.compile_all, "srt": srt, "sim": sim_warm.compile_all, "alis": alis_warm.compile_all}
    took = {}
    for name, step in steps.items():
        if only is not None and name not in only:
            continue
        t0 = time.perf_counter()
        step()
        took[name] = time.perf_counter() - t0
    return took


if __name__ == "__main__":
    took = compile_all()
    print("libs.warm: numba's cache holds the loops of " + ", ".join(f"{k} ({v:.1f} s)" for k, v in took.items()))
