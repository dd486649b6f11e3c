"""Pinned validation figures of the shipped specs on the bundled real traces.

Run `python -m tests.sim.pins` to print the current figures (to update PINS after a deliberate model
change; say why in the commit).
"""
from __future__ import annotations

from blockheat.libs.readers.srt import read_srt
from blockheat.sim.specs import load
from blockheat.sim.validate import read_validation_trace, validate_closed_loop, validate_srt
from tests.sim.conftest import C2247A_TRACE, HPLAJW_TRACE

#: hp_c2247a.trace closed loop on sim/specs/hp_c2247a.toml (DiskSim's parameters, translated).
C2247A = {"requests": 9999, "measured_mean_ms": 15.2982, "simulated_mean_ms": 15.3136, "demerit_ms": 0.0931,
          "disksim_demerit_ms": 0.0892}
#: The same replay, reads and writes apart.
C2247A_BY_OP = {
    "read": {"requests": 5115, "measured_mean_ms": 14.6104, "simulated_mean_ms": 14.7006, "demerit_ms": 0.1489,
             "disksim_demerit_ms": 0.1458},
    "write": {"requests": 4884, "measured_mean_ms": 16.0186, "simulated_mean_ms": 15.9555, "demerit_ms": 0.1243,
              "disksim_demerit_ms": 0.1231},
}
#: ajw.1week.srt open loop (C-LOOK) on the header's HP 335H, per device.
HPLAJW = {
    0: {"requests": 42252, "measured_mean_ms": 25.3543, "simulated_mean_ms": 21.5252, "demerit_ms": 3.9032,
        "disksim_demerit_ms": 3.924},
    1: {"requests": 2267, "measured_mean_ms": 20.1267, "simulated_mean_ms": 16.0683, "demerit_ms": 5.6348,
        "disksim_demerit_ms": 5.6609},
}


def current() -> tuple[dict[str, float | int], dict[int, dict[str, float | int]]]:
    result = validate_closed_loop(load("hp_c2247a"), read_validation_trace(C2247A_TRACE))
    hplajw = {c.device: c.result.summary() for c in validate_srt(*read_srt(str(HPLAJW_TRACE))[:2])}
    return {**result.summary(), "by_op": {op: r.summary() for op, r in result.by_operation().items()}}, hplajw


if __name__ == "__main__":
    c, h = current()
    print(f"C2247A = {c}")
    print("HPLAJW = {")
    for k, v in h.items():
        print(f"    {k}: {v},")
    print("}")
