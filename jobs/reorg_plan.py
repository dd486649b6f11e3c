"""Spark application: a reorganization plan for one trace, window and policy from its scorecard
(`policy_scores`), stored in `reorg_plans` and `reorg_plan_steps` (libs.table_io.plans, which also holds the plan
check and export behind `blockheat plan check|export`). Nothing is ever applied: plans are documents for review."""
from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from blockheat.libs.io import storage
from blockheat.libs.io.session import SparkConfig, build_session
from blockheat.libs.io.table_versions import table_version
from blockheat.libs.io.tables import read_table, trace_info, trace_rows
from blockheat.libs.io.worker import python_task
from blockheat.libs.plans.cost import IDLE_MIN_S, MoveBudget
from blockheat.libs.plans.document import NOW_OPTION, PlanInputs, build_plan, no_improvement_reason, parse_utc
from blockheat.libs.plans.policies import FAMILIES
from blockheat.libs.plans.scorecard import check_window, parse_window
from blockheat.libs.plans.target_spec import resolve_spec
from blockheat.libs.plans.types import (
    BASELINE,
    Outcome,
    PlanError,
    PlanPart,
    PolicyError,
    SafetyLimits,
    Target,
    Variant,
)
from blockheat.libs.table_io.plans import export, store
from blockheat.schemas import cooling_moves, policy_scores, sim_results
from blockheat.schemas.requests import REPLAY_COLUMNS
from blockheat.sim import (
    DiskArray,
    Extent,
    ExtentMap,
    ExtentTable,
    ScenarioConfig,
    SimConfig,
    Simulation,
    demerit_ms,
    partition_layout,
    per_request,
)
from blockheat.sim import requests_from_arrow as from_arrow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

BASE_KEYS = ("spec", "scheduler", "speedup", "seed", "devices", "device_sectors", "scenario_id")
EXTENT_DDL = "logical_start long, sectors long, disk long, physical_start long"
VALIDATION_DDL = ("device string, requests long, measured_mean_ms double, simulated_mean_ms double, "
                  "demerit_ms double")
VALIDATION_METHOD = ("access times (response_us - queue_us, as HP SRT traces record them) of the window's requests "
                     "against the disk model's busy time per request, each device alone on one disk as traced "
                     "(sim.validate's demerit: RMS distance between the CDFs, per device; demerit_ms is their "
                     "request-weighted RMS)")


@dataclass(frozen=True)
class PlanConfig:
    """One plan: trace, policy (a policy_id, a family name for its best-ranked variant, or "best" for the
    best-ranked plannable variant), the scored window, the clock (None: now, UTC), validity, the minimum
    improvement that justifies moving data, and the safety limits."""

    trace_id: str
    policy: str
    window: str = "all"
    now: dt.datetime | None = None
    valid_hours: float = 24.0
    min_improvement: float = 0.01
    limits: SafetyLimits = field(default_factory=SafetyLimits)
    budget: MoveBudget = field(default_factory=MoveBudget)

    def __post_init__(self) -> None:
        if not self.valid_hours > 0:
            raise PlanError(f"valid_hours must be > 0, got {self.valid_hours}")
        if not 0 <= self.min_improvement < 1:
            raise PlanError(f"min_improvement must be in [0, 1), got {self.min_improvement}")


def choose(rows: Sequence[Mapping[str, Any]], policy: str) -> Mapping[str, Any]:
    """The scorecard row a --policy names: its policy_id, a family's best-ranked variant, or "best"."""
    by_rank = sorted(rows, key=lambda r: r["rank"])
    if policy == "best":
        found = [r for r in by_rank if r["plannable"]]
    else:
        found = [r for r in by_rank if r["policy_id"] == policy] or [r for r in by_rank if r["family"] == policy]
    if not found:
        raise PolicyError(f"policy {policy!r} is not in the scorecard; scored: {[r['policy_id'] for r in by_rank]} "
                          "(or a family name, or 'best')")
    if not found[0]["plannable"]:
        raise PolicyError(f"policy {found[0]['policy_id']!r} cannot be planned: {found[0]['note']}")
    return found[0]


def target_of(trace_id: str, scenario: Mapping[str, Any]) -> Target:
    """The array a scored scenario ran on, from its scenario (as stored in sim_results.scenario_json)."""
    return Target(trace_id, tuple(scenario["devices"]), tuple(int(x) for x in scenario["device_sectors"]),
                  resolve_spec(scenario["spec"]), scenario["spec"], str(scenario["scheduler"]),
                  float(scenario["speedup"]), int(scenario["seed"]))


def run(spark: SparkSession, cfg: SparkConfig, job: PlanConfig) -> dict[str, Any]:
    """Builds the plan, replaces its rows of reorg_plans and reorg_plan_steps, returns the document. With policy
    "best", every plannable scored policy is planned and the one worth running with the largest net value
    (libs.plans.cost) is kept; when none is worth running, the best-ranked one's document says why."""
    if job.policy == "best":
        docs = candidates(spark, cfg, job)
        worth = [d for d in docs if d["status"] == "proposed"]
        doc = max(worth, key=lambda d: d["cost_benefit"]["net_s_per_window"] or 0.0) if worth else docs[0]
    else:
        plan = _Planning.of(spark, cfg, job)
        doc = plan.document(choose(plan.scores, job.policy))
    store(spark, cfg, doc)
    log.info("plan %s for %s (%s, window %s): %s, %d steps, %d bytes", doc["plan_id"], job.trace_id,
             doc["policy"]["policy_id"], doc["inputs"]["window"]["window_id"], doc["status"],
             doc["summary"]["n_steps"], doc["summary"]["bytes_to_move"])
    return doc


def candidates(spark: SparkSession, cfg: SparkConfig, job: PlanConfig) -> list[dict[str, Any]]:
    """The plan document (not stored) of every plannable scored policy but the baseline, in rank order: what `plan
    --policy best` chooses from and what `score` shows each policy's cost and benefit with."""
    plan = _Planning.of(spark, cfg, job)
    ranked = sorted((r for r in plan.scores if r["plannable"] and r["family"] != BASELINE), key=lambda r: r["rank"])
    if not ranked:
        raise PolicyError(f"no plannable policy in the scorecard of trace {job.trace_id!r} window "
                          f"{plan.window.window_id}")
    return [plan.document(r) for r in ranked]


@dataclass
class _Planning:
    """What every plan of one trace's scored window reads once: the scorecard, its baseline, the window's requests,
    and (per disk spec) the model's validation and the window's idle time."""

    spark: SparkSession
    cfg: SparkConfig
    job: PlanConfig
    now: dt.datetime
    window: Any
    tables: dict[str, int | None]
    scores: list[dict[str, Any]]
    base: dict[str, Any]
    windowed: DataFrame
    measured: dict[str, tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=dict)

    @classmethod
    def of(cls, spark: SparkSession, cfg: SparkConfig, job: PlanConfig) -> _Planning:
        info = trace_info(spark, cfg.warehouse, job.trace_id)
        window = parse_window(job.window, span_us=int(info["span_us"]))
        tables = {t: table_version(cfg.warehouse, t) for t in ("traces", "requests", policy_scores.TABLE,
                                                                sim_results.TABLE)}
        if tables[policy_scores.TABLE] is None:
            raise PlanError(f"no scorecard yet: run blockheat score {job.trace_id} --window {job.window}")
        scores = [r for r in trace_rows(spark, cfg.warehouse, policy_scores.TABLE, job.trace_id,
                                        version=tables[policy_scores.TABLE]) if r["window_id"] == window.window_id]
        if not scores:
            raise PlanError(f"policy_scores has no rows for trace {job.trace_id!r} window {window.window_id}: run "
                            f"blockheat score {job.trace_id} --window {job.window}")
        base = next((r for r in scores if r["policy_id"] == BASELINE), None)
        if base is None:
            raise PlanError(f"policy_scores of trace {job.trace_id!r} window {window.window_id} has no {BASELINE} "
                            "row")
        requests = read_table(spark, cfg.warehouse, "requests", job.trace_id, version=tables["requests"])
        windowed = requests.where((F.col("ts_us") >= window.start_us) & (F.col("ts_us") < window.end_us))
        return cls(spark, cfg, job, job.now or dt.datetime.now(dt.UTC), window, tables, scores, base, windowed)

    def document(self, row: Mapping[str, Any]) -> dict[str, Any]:
        return _document(self.spark, self.cfg, self.job, row, self.base, self.window, dict(self.tables),
                         self.windowed, self.now, self.measured)


def _document(spark: SparkSession, cfg: SparkConfig, job: PlanConfig, row: Mapping[str, Any],
              base: Mapping[str, Any], window: Any, tables: dict[str, int | None], windowed: DataFrame,
              now: dt.datetime, measured: dict[str, tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """The plan document of one scored policy (not stored)."""
    family = FAMILIES.get(row["family"])
    if family is None or family.plan is None:
        raise PolicyError(f"policy family {row['family']!r} has no planner in this version")
    if family.needs == "moves":
        tables[cooling_moves.TABLE] = table_version(cfg.warehouse, cooling_moves.TABLE)
    sims = {r["scenario_id"]: r for r in trace_rows(spark, cfg.warehouse, sim_results.TABLE, job.trace_id,
                                                    version=tables[sim_results.TABLE])
            if r["grid_id"] == row["grid_id"] and r["scenario_id"] in (row["scenario_id"], base["scenario_id"])}
    missing = [s for s in (row["scenario_id"], base["scenario_id"]) if s not in sims]
    if missing:
        raise PlanError(f"sim_results has no scenario {missing} of grid {row['grid_id']!r}: rescore the window")
    scenario = json.loads(sims[row["scenario_id"]]["scenario_json"])
    target = target_of(job.trace_id, scenario)
    variant = Variant(row["policy_id"], row["family"], json.loads(row["params_json"]),
                      {k: v for k, v in scenario.items() if k not in BASE_KEYS}, bool(row["plannable"]), row["note"])
    key = json.dumps(scenario["spec"], sort_keys=True)
    if key not in measured:
        measured[key] = (validation(windowed, target),
                         idle_time(windowed, target.devices, window.start_us, window.end_us))
    checked, idle = measured[key]
    inputs = PlanInputs(target, variant, family.description, window.as_dict(int(row["window_requests"])),
                        {t: int(v) for t, v in tables.items() if v is not None}, row, base, sims[row["scenario_id"]],
                        sims[base["scenario_id"]], checked, now, dt.timedelta(hours=job.valid_hours), job.limits,
                        job.min_improvement, idle, job.budget)
    part = PlanPart([], {})
    if no_improvement_reason(inputs) is None:
        outcome = Outcome(variant, target)
        if family.needs == "layout":
            outcome = Outcome(variant, target, layout=scenario_layout(windowed, scenario))
        elif family.needs == "moves":
            outcome = Outcome(variant, target, moves=_moves(spark, cfg, row, tables[cooling_moves.TABLE]))
        elif family.needs == "requests":
            # One window's requests: the planner runs the same numpy cores as the simulated partition did.
            outcome = Outcome(variant, target, requests=windowed.select(*REPLAY_COLUMNS).toArrow())
        part = family.plan(outcome)
    return build_plan(inputs, part)


def _moves(spark: SparkSession, cfg: SparkConfig, row: Mapping[str, Any], version: int | None) -> list[dict[str, Any]]:
    if version is None:
        return []
    return [r.asDict() for r in read_table(spark, cfg.warehouse, cooling_moves.TABLE, row["trace_id"], version=version)
            .where((F.col("grid_id") == row["grid_id"]) & (F.col("array_group") == row["array_group"])
                   & (F.col("scenario_id") == row["scenario_id"])).collect()]


def scenario_layout(windowed: DataFrame, scenario: Mapping[str, Any]) -> ExtentMap:
    """The extent map the scenario ran with (greedy allocation: from the window's heats), built on an executor
    from the window's requests by sim.scenarios.partition_layout, as the simulation built it."""

    def build(key: tuple[Any, ...], table: pa.Table) -> pa.Table:
        layout = partition_layout(table, ScenarioConfig.from_dict({"scenario_id": "plan", **scenario}))
        names = ("logical_start", "sectors", "disk", "physical_start")
        if isinstance(layout, ExtentTable):
            return pa.table({name: pa.array(getattr(layout, name), pa.int64()) for name in names})
        if not isinstance(layout, ExtentMap):
            raise PlanError(f"scenario layout is {type(layout).__name__}, not an extent map")
        return pa.table({name: pa.array([getattr(e, name) for e in layout.extents], pa.int64()) for name in names})

    rows = (windowed.select(F.lit(0).alias("part"), *REPLAY_COLUMNS).groupBy("part")
            .applyInArrow(python_task(build), EXTENT_DDL).collect())
    extents = sorted((int(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows)
    return ExtentMap(tuple(Extent(*e) for e in extents))


def validation(windowed: DataFrame, target: Target) -> dict[str, Any]:
    """The evidence's validation: each device's replay on the target's disk model against the access times
    the trace recorded, per device on an executor (None figures when the trace records none)."""
    spec_param, scheduler, seed = target.spec_param, target.scheduler, target.seed

    def per_device(key: tuple[Any, ...], table: pa.Table) -> pa.Table:
        table = table.filter(pc.and_(pc.is_valid(table["response_us"]), pc.is_valid(table["queue_us"])))
        device = str(key[0].as_py())
        if table.num_rows == 0:
            return pa.table({"device": [device], "requests": [0], "measured_mean_ms": pa.nulls(1, pa.float64()),
                             "simulated_mean_ms": pa.nulls(1, pa.float64()), "demerit_ms": pa.nulls(1, pa.float64())})
        spec = ScenarioConfig.from_dict({"scenario_id": "validate", "spec": spec_param}).spec
        table = table.sort_by([("ts_us", "ascending"), ("seq", "ascending")])
        reqs, _ = from_arrow(table, sector_size=spec.sector_size)
        sim = Simulation(spec, DiskArray(1, scheduler=scheduler), reqs, SimConfig(per_request=True),
                         rng=np.random.default_rng(seed), device_sectors=[spec.capacity_sectors])
        sim.run()
        simulated = per_request(sim).column("service_ms").to_numpy() * 1000.0
        measured = pc.subtract(table["response_us"], table["queue_us"]).to_numpy()
        return pa.table({"device": [device], "requests": [len(measured)],
                         "measured_mean_ms": [float(np.mean(measured)) / 1000.0],
                         "simulated_mean_ms": [float(np.mean(simulated)) / 1000.0],
                         "demerit_ms": [demerit_ms(measured, simulated)]})

    rows = sorted((r.asDict() for r in windowed.select(*REPLAY_COLUMNS, "response_us", "queue_us")
                   .groupBy("device").applyInArrow(python_task(per_device), VALIDATION_DDL).collect()),
                  key=lambda r: r["device"])
    measured = [r for r in rows if r["requests"]]
    n = sum(r["requests"] for r in measured)
    pooled = math.sqrt(sum(r["requests"] * r["demerit_ms"] ** 2 for r in measured) / n) if n else None
    out: dict[str, Any] = {"available": bool(measured), "method": VALIDATION_METHOD, "spec": target.spec.name,
                           "demerit_ms": pooled,
                           "reason": None if measured else "the trace records no access times (response_us and "
                                                           "queue_us) in this window",
                           "per_device": rows}
    return out


def idle_time(windowed: DataFrame, devices: Sequence[str], start_us: int, end_us: int) -> dict[str, Any]:
    """The window's idle time per device (libs.plans.cost.IDLE_MODEL): gaps of at least IDLE_MIN_S between the
    latest completion so far (arrival + recorded response) and the next arrival, and the window's edges; per device
    the idle seconds, the number of gaps and the three longest (start and end, seconds into the window)."""
    least = int(IDLE_MIN_S * 1e6)
    done = (F.col("ts_us") + F.coalesce(F.col("response_us"), F.lit(0.0))).cast("long")
    before = W.partitionBy("device").orderBy("ts_us", "seq").rowsBetween(W.unboundedPreceding, -1)
    gaps = (windowed.select("device", "ts_us", "seq", done.alias("done"))
            .withColumn("free_from", F.max("done").over(before))
            .where(F.col("ts_us") - F.col("free_from") >= least)
            .select("device", F.col("free_from").alias("start_us"), F.col("ts_us").alias("end_us")))
    edges = {r.device: (r.first, r.last) for r in windowed.groupBy("device").agg(
        F.min("ts_us").alias("first"), F.max(done).alias("last")).collect()}
    found: dict[str, list[tuple[int, int]]] = {d: [] for d in devices}
    for r in gaps.collect():
        found.setdefault(r.device, []).append((int(r.start_us), int(r.end_us)))
    per_device = []
    for d in devices:
        periods = list(found.get(d, []))
        first, last = edges.get(d, (end_us, start_us))
        if d not in edges:
            periods.append((start_us, end_us))
        else:
            periods += [p for p in ((start_us, first), (last, end_us)) if p[1] - p[0] >= least]
        periods.sort(key=lambda p: (p[0] - p[1], p[0]))
        per_device.append({"device": d, "idle_s": sum(b - a for a, b in periods) / 1e6, "periods": len(periods),
                           "longest": [[(a - start_us) / 1e6, (b - start_us) / 1e6] for a, b in periods[:3]]})
    return {"min_period_s": IDLE_MIN_S, "window_s": (end_us - start_us) / 1e6, "per_device": per_device}


def config_from_args(trace_id: str, args: argparse.Namespace) -> PlanConfig:
    """Parsed add_arguments options -> PlanConfig (bad values: PlanError naming the option)."""
    if not args.policy:
        raise PlanError("--policy is required (a policy_id, a family or 'best')")
    limits = SafetyLimits(int(args.max_gib * (1 << 30)), args.max_moves_per_disk, args.throttle_mb_s)
    try:
        budget = MoveBudget(args.max_volume_share, args.max_idle_share, args.min_gain_per_gib)
    except ValueError as exc:
        raise PlanError(f"--max-volume-share, --max-idle-share, --min-gain-per-gib: {exc}") from exc
    try:
        check_window(args.window)                   # its form, before any session
    except PolicyError as exc:
        raise PlanError(str(exc)) from exc
    return PlanConfig(trace_id, args.policy, args.window, parse_utc(args.now) if args.now else None, args.valid_hours,
                      args.min_improvement, limits, budget)


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The build options of this job (after its --trace-id) and of `blockheat plan TRACE_ID`."""
    parser.add_argument("--policy", default=None,
                        help="a scored policy_id (e.g. striped:eq1), a family (its best variant) or 'best'")
    parser.add_argument("--window", default="all", help="the scored window: all (default) or START:END seconds")
    parser.add_argument("--now", **NOW_OPTION)
    parser.add_argument("--valid-hours", type=float, default=24.0, help="validity from created_at (default 24)")
    parser.add_argument("--min-improvement", type=float, default=0.01,
                        help="least improvement of the mean response that justifies moves (default 0.01)")
    parser.add_argument("--max-gib", type=float, default=64.0, help="safety: most data to move, GiB (default 64)")
    parser.add_argument("--max-moves-per-disk", type=int, default=1, help="safety: concurrent moves per disk")
    parser.add_argument("--throttle-mb-s", type=float, default=50.0, help="safety: copy bandwidth, MB/s (default 50)")
    budget = MoveBudget()
    parser.add_argument("--max-volume-share", type=float, default=budget.max_volume_share,
                        help=f"budget: most of each volume a plan moves (default {budget.max_volume_share:g})")
    parser.add_argument("--max-idle-share", type=float, default=budget.max_idle_share,
                        help="budget: most of each disk's idle time in a window like the scored one the moves may "
                             f"take (default {budget.max_idle_share:g})")
    parser.add_argument("--min-gain-per-gib", type=float, default=budget.min_gain_per_gib,
                        help="budget: least improvement of the mean response per GiB moved (default "
                             f"{budget.min_gain_per_gib:g})")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit entry point: --trace-id ID --policy POLICY [--window START:END] [--now ISO] [...]."""
    parser = argparse.ArgumentParser(prog="reorg_plan", description=__doc__)
    parser.add_argument("--trace-id", required=True)
    parser.add_argument("--export", default=None, metavar="DIR",
                        help="also write the plan for review to DIR/<plan_id>.json (the nightly DAG's exports)")
    args = add_arguments(parser).parse_args(argv)
    job = config_from_args(args.trace_id, args)
    cfg = SparkConfig.from_env(f"reorg_plan {args.trace_id}")
    doc = run(build_session(cfg), cfg, job)
    if args.export:
        export(doc, "json", storage.join(storage.normalize(args.export), f"{doc['plan_id']}.json"))
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    raise SystemExit(main())
