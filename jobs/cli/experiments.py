"""`blockheat experiment NAME`: run one of the papers' experiments (libs/experiments) with the simulator and
write its tables (Parquet), PNG plots and a markdown summary (ours next to the paper's, a verdict per claim)
under <warehouse>/experiments/<name>/. No Spark."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from blockheat.jobs.cli.common import UsageError, add_command, add_output_options, output


def add_commands(sub: Any) -> None:
    exp = add_command(sub, "experiment", "run a paper experiment in the simulator: tables, plots, summary.md with "
                                         "the claims", ["blockheat experiment placement", "blockheat experiment all"])
    exp.defer(_experiment_arguments).set_defaults(func=cmd_experiment)


def _experiment_arguments(exp: argparse.ArgumentParser) -> None:
    from blockheat.libs.experiments import (  # lazy: numpy and the simulator load only for `experiment`
        EXPERIMENTS,
        SCALES,
    )

    exp.description = ("Experiments: " + ", ".join(sorted(EXPERIMENTS)) + " (or 'all'). Outputs go to "
                       "<warehouse>/experiments/<name>/ (BLOCKHEAT_WAREHOUSE, default ./warehouse) unless --out.")
    exp.add_argument("name", metavar="NAME", help="experiment name, or 'all'")
    exp.add_argument("--scale", choices=SCALES, default="full", help="full (default) or tiny (the tests' scale)")
    exp.add_argument("--seed", type=int, default=1, help="seed of the experiment's generated workloads and "
                                                        "random placements (default 1)")
    exp.add_argument("--out", type=Path, default=None,
                     help="output directory (default <warehouse>/experiments/NAME); with 'all', the directory that "
                          "gets one folder per experiment and summary.md with every claim (default "
                          "<warehouse>/experiments)")
    add_output_options(exp)


def cmd_experiment(args: argparse.Namespace) -> int:
    # lazy: numpy, the simulator and the session settings load only when `experiment` runs
    from blockheat.libs.experiments import EXPERIMENTS, run_experiment
    from blockheat.libs.experiments.common import all_claims_markdown, tally_line
    from blockheat.libs.io.session import SparkConfig

    everything = args.name == "all"
    names = sorted(EXPERIMENTS) if everything else [args.name]
    if not everything and args.name not in EXPERIMENTS:
        raise UsageError(f"unknown experiment {args.name!r}; known: {', '.join(sorted(EXPERIMENTS))}, all")
    # --out is the experiment's directory, or with 'all' the directory holding one per experiment
    root = args.out if args.out is not None else SparkConfig.from_env(attach=False).warehouse / "experiments"
    out = output(args)
    results = []
    for name in _with_progress(names):
        result = run_experiment(name, scale=args.scale, seed=args.seed)
        results.append(result)
        target = root / name if everything or args.out is None else args.out
        written = result.write(target)
        out.rows([{"experiment": name, "claim": c.claim, "kind": c.kind, "paper": c.paper, "ours": c.ours,
                   "verdict": c.verdict, "reason": c.reason} for c in result.claims],
                 ["experiment", "claim", "kind", "verdict", "ours"], name=name,
                 title=f"\n{result.title}\n{name} ({args.scale}): {result.seconds:.1f} s, {tally_line(result.claims)}")
        out.note(f"written: {target}/ ({', '.join(str(p.relative_to(target)) for p in written)})")
    if everything:
        summary = root / "summary.md"
        summary.write_text(all_claims_markdown(results))
        out.note(f"every claim: {summary} ({tally_line([c for r in results for c in r.claims])})")
    return out.render()


def _with_progress(names: list[str]) -> Any:
    """The experiments to run, with a progress line (experiments done, time left) on a terminal after 5 s."""
    if len(names) == 1 or not sys.stderr.isatty():
        return names
    from tqdm import tqdm  # lazy: loads only for `experiment all` on a terminal

    return tqdm(names, desc="experiments", unit="experiment", file=sys.stderr, leave=False, delay=5)
