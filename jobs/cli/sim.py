"""`blockheat sim ...`: the simulator's commands without Spark (validate a disk spec against a drive's
measured trace, list the shipped disk specs), and `blockheat simulate GRID_FILE`, the Spark stage that
simulates a scenario grid over ingested traces."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from blockheat.jobs.cli.common import UsageError, add_command, add_output_options, output, spark_session

SRT_MAGIC = b"$$TR_IOREC"


def add_commands(sub: Any) -> None:
    sim = add_command(sub, "sim", "the disk-array simulator (validation, disk specs)", "blockheat sim specs")
    simsub = sim.add_subparsers(dest="sim_command", required=True, metavar="COMMAND")

    val = add_command(
        simsub, "validate", "replay a drive's measured trace on a disk spec and compare access times",
        "blockheat sim validate --spec hp_c2247a --trace data/traces/disksim-validation/hp_c2247a.trace",
        description="DiskSim validation traces replay closed loop (one request outstanding, the recorded idle gap "
                    "after each completion); HP SRT traces replay open loop per device on the disk the header "
                    "describes. Prints the measured and simulated mean access times and the demerit (RMS distance "
                    "between the two CDFs, ms; disksim_demerit_ms: the same as DiskSim 4.0's rms tool computes it "
                    "from its bucketed distributions, the measure of DiskSim's own figures), for all requests and "
                    "for the reads and the writes apart, and draws both CDFs; --format json prints one object.")
    val.add_argument("--spec", help="shipped spec name or a .json/.toml spec file (SRT: default from the header)")
    val.add_argument("--trace", required=True, help="DiskSim validate trace or HP SRT trace")
    val.add_argument("--plot", default=None,
                     help="PNG file for the CDFs (default: <warehouse>/validation/<trace file name>.cdf.png; "
                          "'none' to skip)")
    val.add_argument("--scheduler", default="clook", choices=("fcfs", "sstf", "clook"),
                     help="per-disk queue for SRT replays (default clook, like the traced driver's C-SCAN)")
    add_output_options(val)
    val.set_defaults(func=cmd_sim_validate)

    specs = add_command(simsub, "specs", "list the shipped disk specs", "blockheat sim specs --format markdown")
    add_output_options(specs)
    specs.set_defaults(func=cmd_sim_specs)

    grid = add_command(
        sub, "simulate", "simulate a scenario grid over ingested traces (Spark) into sim_results, sim_timeseries, "
                         "cooling_moves", "blockheat simulate my-grid.json --format csv",
        description="Runs every (trace, array group, scenario) of the grid file as one Spark partition, replaces "
                    "the grid's rows of sim_results, sim_timeseries and cooling_moves, and prints one line per "
                    "scenario. The grid format is in sim/README.md (Scenario grids).")
    grid.add_argument("grid_file", metavar="GRID_FILE", help="scenario grid (JSON)")
    grid.add_argument("--progress-every", type=float, default=10.0, metavar="S",
                      help="seconds between progress log lines (default 10)")
    add_output_options(grid)
    grid.set_defaults(func=cmd_simulate)


def _spec(text: str | None) -> Any:
    # lazy: the simulator (numpy) loads only for `sim validate`
    from blockheat.sim import SpecError
    from blockheat.sim import resolve_spec as resolve

    if text is None:
        return None
    try:
        return resolve(text)
    except SpecError as exc:
        raise UsageError(str(exc)) from exc


def cmd_sim_validate(args: argparse.Namespace) -> int:
    # lazy: the simulator, its validation and the trace readers load only for `sim validate`
    from blockheat.libs.readers.srt import read_srt
    from blockheat.sim import ValidationTraceError, plot_cdfs, read_validation_trace, validate_closed_loop, validate_srt

    trace = Path(args.trace)
    try:
        head = trace.read_bytes()[: len(SRT_MAGIC)]
    except OSError as exc:
        raise UsageError(f"--trace {trace}: cannot read ({exc.strerror})") from exc
    spec = _spec(args.spec)
    plot = None if (args.plot or "").lower() == "none" else Path(args.plot) if args.plot else _default_plot(trace)
    out = output(args)
    if head == SRT_MAGIC:
        comparisons = validate_srt(*read_srt(str(trace))[:2], spec=spec, scheduler=args.scheduler)
        rows = [{"device": c.device, **row} for c in comparisons for row in c.result.rows()]
        if plot is not None:
            plot_cdfs([c.result for c in comparisons], plot, title=f"{trace.name}: access time per request")
        if args.output == "json":
            return _json_document({"devices": rows, "spec": comparisons[0].spec_name if comparisons else None})
        out.rows(rows, ["device", "op", "requests", "measured_mean_ms", "simulated_mean_ms", "demerit_ms",
                       "disksim_demerit_ms"], name="devices")
        if plot is not None:
            out.note(f"CDFs: {plot}")
        return out.render()
    if spec is None:
        raise UsageError("--spec is required for a DiskSim validation trace")
    try:
        vtrace = read_validation_trace(trace)
    except ValidationTraceError as exc:
        raise UsageError(str(exc)) from exc
    result = validate_closed_loop(spec, vtrace)
    if plot is not None:
        plot_cdfs([result], plot, title=f"{trace.name} on {spec.name} (closed loop)")
    rows = result.rows()
    if args.output == "json":
        return _json_document({**result.summary(), "operations": rows})
    out.rows(rows, ["op", "requests", "measured_mean_ms", "simulated_mean_ms", "demerit_ms", "disksim_demerit_ms"],
             name="validation")
    if plot is not None:
        out.note(f"CDFs: {plot}")
    return out.render()


def _default_plot(trace: Path) -> Path:
    """Where `sim validate` draws the CDFs unless --plot says: <warehouse>/validation/<trace>.cdf.png (made), never
    the working directory; UsageError for a warehouse in an object store (give --plot)."""
    from blockheat.libs.io import storage  # lazy: the storage layer loads pyarrow

    warehouse = storage.warehouse_from_env()
    if not storage.is_local(warehouse):
        raise UsageError(f"the warehouse {warehouse} is in an object store: give the CDFs' file with --plot FILE "
                         "(or --plot none)")
    folder = Path(storage.normalize(warehouse)) / "validation"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{trace.name}.cdf.png"


def _json_document(doc: Any) -> int:
    sys.stdout.write(json.dumps(doc) + "\n")
    return 0


def cmd_sim_specs(args: argparse.Namespace) -> int:
    from blockheat.sim import SHIPPED_SPECS as SHIPPED  # lazy: the simulator (numpy) loads only for `sim specs`
    from blockheat.sim import load_spec as load

    rows = []
    for name in SHIPPED:
        s = load(name)
        rows.append({"spec": name, "model": s.name, "capacity_bytes": s.capacity_bytes, "rpm": s.rpm,
                     "cylinders": s.cylinders, "surfaces": s.surfaces, "zones": len(s.zones),
                     "mean_seek_ms": s.mean_seek_ms(), "cache_segments": s.cache.segments})
    out = output(args)
    out.rows(rows, list(rows[0]), name="specs")
    return out.render()


def cmd_simulate(args: argparse.Namespace) -> int:
    # lazy: the job (pyspark, numba) loads only when `simulate` runs
    from blockheat.jobs.simulate import run
    from blockheat.libs.simulation.grid import GridError, load_grid

    try:
        grid = load_grid(args.grid_file)      # checked before Spark starts
    except GridError as exc:
        raise UsageError(str(exc)) from exc
    if not args.progress_every > 0:
        raise UsageError(f"--progress-every must be > 0, got {args.progress_every}")
    spark, cfg = spark_session(args, f"simulate {grid.grid_id}")
    try:
        summary = run(spark, cfg, grid, progress_every_s=args.progress_every)
    except GridError as exc:
        raise UsageError(str(exc)) from exc
    rows = [{"trace": r["trace_id"], "group": r["array_group"], "scenario": r["scenario_id"], "layout": r["layout"],
             "alpha": r["speedup"], "requests": r["requests"], "mean_ms": r["mean_response_ms"],
             "p95_ms": r["p95_response_ms"], "max_util": r["hottest_utilization"], "saturated": r["saturated"]}
            for r in summary.results]
    out = output(args)
    out.rows(rows, ["trace", "group", "scenario", "layout", "alpha", "requests", "mean_ms", "p95_ms", "max_util",
                    "saturated"], name="scenarios")
    out.note(f"\n{summary.partitions} scenario partitions in {summary.seconds:.1f} s; tables: sim_results, "
             f"sim_timeseries ({summary.timeseries_rows:,} rows)"
             + (f", cooling_moves ({summary.cooling_moves:,} rows)" if summary.cooling_moves else "")
             + f" WHERE grid_id = '{summary.grid_id}'")
    return out.render()
