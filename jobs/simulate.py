"""Spark application: simulate a scenario grid (`blockheat simulate GRID_FILE`) into `sim_results`,
`sim_timeseries` and `cooling_moves`, one partition per (trace, array group, scenario), each simulated by
sim.scenarios on an executor (a scenario's policy, e.g. disk cooling, runs there too)."""
from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

from blockheat.libs.io.session import SparkConfig, build_session
from blockheat.libs.simulation.grid import load_grid
from blockheat.libs.simulation.stage import run


def parse_args(argv: Sequence[str] | None) -> Path:
    parser = argparse.ArgumentParser(prog="simulate", description=__doc__)
    parser.add_argument("grid_file", type=Path, help="scenario grid (JSON; see sim/README.md)")
    return parser.parse_args(argv).grid_file


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit entry point."""
    grid = load_grid(parse_args(argv))
    cfg = SparkConfig.from_env(f"simulate {grid.grid_id}")
    run(build_session(cfg), cfg, grid)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    raise SystemExit(main())
