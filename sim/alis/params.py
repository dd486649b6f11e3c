"""ALIS's parameters (AlisParams, the paper's defaults) as the simulator's planner (sim.alis.plan) and policy
(sim.alis.policy) take them, checked when built.

    params = AlisParams(mode="combined", plan="realizable", interval_s=3600)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from blockheat.sim.alis.layout import LAYOUTS, MODES
from blockheat.sim.alis.runs import THRESHOLD, THRESHOLD_COMBINED

__all__ = ["DAY_S", "DAY_US", "PLANS", "AlisParams"]

PLANS = ("realizable", "lookahead")
DAY_US = 86_400_000_000                   # the paper's reorganization interval: one day
DAY_S = DAY_US / 1e6


@dataclass(frozen=True)
class AlisParams:
    """ALIS's knobs with the paper's defaults (server settings: beta 0.8; the run threshold 0.1 alone, 0.4
    combined with heat clustering). mode: what fills the RA; plan: "realizable" (each interval's copies
    planned from the history up to its start) or "lookahead" (from the interval's own references);
    interval_s: reorganization interval; heat_writes: writes count in heat clustering (section 6.3);
    include_writes: writes build the access graph too (off: section 6.3); graph_share: the graph's size
    budget as a share of the storage used (19 bytes a vertex, 20 an edge); heat_layout / extent_bytes:
    the heat region's layout (sim.alis.layout.arrange)."""

    mode: str = "combined"
    plan: str = "realizable"
    interval_s: float = DAY_S
    ra_share: float = 0.15
    ra_offset: float = 0.30
    heat_layout: str = "sequential"
    extent_bytes: int = 1 << 30
    alpha: float = 0.8
    heat_writes: bool = True
    tau: int = 9
    f: float = 1.0
    beta: float = 0.8
    graph_share: float = 0.005
    threshold: float | None = None
    min_run_length: int | None = None
    include_writes: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"ALIS mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.plan not in PLANS:
            raise ValueError(f"ALIS plan must be one of {', '.join(PLANS)}, got {self.plan!r}")
        if self.heat_layout not in LAYOUTS:
            raise ValueError(f"ALIS heat_layout must be one of {', '.join(LAYOUTS)}, got {self.heat_layout!r}")
        if not (self.interval_s > 0 and math.isfinite(self.interval_s)):
            raise ValueError(f"ALIS interval_s must be a positive number, got {self.interval_s!r}")
        if not 0.0 < self.ra_share <= 1.0:
            raise ValueError(f"ALIS ra_share must be in (0, 1], got {self.ra_share}")
        if not 0.0 <= self.ra_offset <= 1.0:
            raise ValueError(f"ALIS ra_offset must be in [0, 1], got {self.ra_offset}")
        for name in ("alpha", "beta", "f"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"ALIS {name} must be in [0, 1], got {getattr(self, name)}")
        if self.tau < 1:
            raise ValueError(f"ALIS tau (context size) must be >= 1, got {self.tau}")
        if not self.graph_share > 0:
            raise ValueError(f"ALIS graph_share must be > 0, got {self.graph_share}")
        if self.threshold is not None and self.threshold < 0:
            raise ValueError(f"ALIS threshold must be >= 0, got {self.threshold}")
        if self.min_run_length is not None and self.min_run_length < 1:
            raise ValueError(f"ALIS min_run_length must be >= 1, got {self.min_run_length}")
        if self.extent_bytes <= 0:
            raise ValueError(f"ALIS extent_bytes must be > 0, got {self.extent_bytes}")

    @property
    def interval_us(self) -> float:
        return self.interval_s * 1e6

    @property
    def run_threshold(self) -> float:
        if self.threshold is not None:
            return self.threshold
        return THRESHOLD_COMBINED if self.mode == "combined" else THRESHOLD

    @property
    def min_length(self) -> int:
        return self.tau if self.min_run_length is None else self.min_run_length
