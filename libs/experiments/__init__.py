"""Paper experiments: pure drivers that call the simulator and return tables, plots,
claims checked against the paper and a markdown summary; `blockheat experiment NAME` writes them under
<warehouse>/experiments/<name>/. No Spark.

    from blockheat.libs.experiments import run_experiment
    out = run_experiment("placement", scale="tiny")
    out.claims                      # [Claim(claim, paper, ours, holds), ...]
    out.write(Path("warehouse/experiments/placement"))
"""
from __future__ import annotations

import importlib

from blockheat.libs.experiments.common import SCALES, Claim, ExperimentOutput

__all__ = ["EXPERIMENTS", "SCALES", "Claim", "ExperimentOutput", "run_experiment"]

#: name -> module (each has TITLE and run(scale, seed) -> ExperimentOutput).
EXPERIMENTS: dict[str, str] = {
    "placement": "blockheat.libs.experiments.placement",
    "five-cooling": "blockheat.libs.experiments.five_cooling",
    "alis": "blockheat.libs.experiments.alis",
    "lachesis": "blockheat.libs.experiments.lachesis",
    "five-striping": "blockheat.libs.experiments.five_striping",
    "five-cooling-trace": "blockheat.libs.experiments.five_cooling_trace",
    "ssa-bsu": "blockheat.libs.experiments.ssa_bsu",
}


def run_experiment(name: str, *, scale: str = "full", seed: int = 1) -> ExperimentOutput:
    """Run one experiment at `scale` ("tiny" for tests, "full" for the command)."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; known: {sorted(EXPERIMENTS)}")
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {list(SCALES)}, got {scale!r}")
    module = importlib.import_module(EXPERIMENTS[name])
    return module.run(scale=scale, seed=seed)
