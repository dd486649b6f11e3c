"""Fixtures for the simulator tests: a toy disk whose timings are easy to work out by hand, the shipped
specs, the bundled real traces. Nothing here starts Spark."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from blockheat.sim.array import DiskArray
from blockheat.sim.engine import SimConfig, Simulation
from blockheat.sim.records import Requests
from blockheat.sim.spec import DiskSpec

REPO = Path(__file__).resolve().parents[2]
C2247A_TRACE = REPO / "data/traces/disksim-validation/hp_c2247a.trace"
HPLAJW_TRACE = REPO / "data/traces/hplajw/ajw.1week.srt"


def toy_spec(**changes: Any) -> DiskSpec:
    """100 cylinders x 2 surfaces x 100 sectors of 512 B, 6000 rpm (10 ms per revolution, 100 us per
    sector), seek 1 ms + 0.01 ms per cylinder, head switch 0.5 ms, overheads 0.1 (hit) / 0.2 (miss) /
    0.3 (write) ms, no bus time, no skew, no cache."""
    data: dict[str, Any] = {
        "name": "toy", "sector_size": 512, "cylinders": 100, "surfaces": 2, "rpm": 6000,
        "zones": [{"first_cylinder": 0, "last_cylinder": 99, "sectors_per_track": 100}],
        "seek": {"linear": {"c_ms": 1.0, "e_ms": 0.01}},
        "head_switch_ms": 0.5,
        "overhead_ms": {"read_hit": 0.1, "read_miss": 0.2, "write": 0.3},
    }
    data.update(changes)
    return DiskSpec.from_dict(data)


def requests(rows: list[tuple[float, int, int, int, str]], **kw: Any) -> Requests:
    """Requests from (arrival_us, device, lbn, sectors, 'R'|'W') rows."""
    a = np.array([r[0] for r in rows], dtype=np.float64)
    return Requests.build(a, [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows],
                          [r[4] == "R" for r in rows], **kw)


def run(spec: DiskSpec, array: DiskArray, reqs: Requests, seed: int = 1, **cfg: Any) -> Simulation:
    sim = Simulation(spec, array, reqs, SimConfig(**cfg), rng=np.random.default_rng(seed))
    sim.run()
    return sim


@pytest.fixture
def toy() -> DiskSpec:
    return toy_spec()
