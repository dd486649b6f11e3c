"""`blockheat score` (the policy scorecard: every policy family swept through the Spark simulator stage,
ranked against the as-traced layout) and `blockheat plan` (build, check and export reorganization plans;
nothing is ever applied)."""
from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path
from typing import Any

from blockheat.jobs.cli.common import (
    NotFoundError,
    UsageError,
    add_command,
    add_output_options,
    output,
    say,
    spark_session,
)
from blockheat.jobs.cli.output import BYTES, CHANGE, human
from blockheat.libs.plans.types import PolicyError

PLAN_VERBS = ("export", "check", "schema")


def add_commands(sub: Any) -> None:
    sc = add_command(
        sub, "score", "policy scorecard of a trace window (policy_scores): every policy simulated, ranked",
        "blockheat score hplajw --window 0:86400",
        description="Replays the window on the trace's array under every registered policy family (as traced, "
                    "the striping methods, random, greedy allocation, disk cooling, ALIS where its area fits, track "
                    "alignment reported per traced request) in one "
                    "Spark simulation stage, ranks them by mean response time and stores policy_scores.")
    sc.defer(_score_arguments).set_defaults(func=cmd_score)

    pl = add_command(
        sub, "plan", "build (TRACE_ID --policy P), check (check PLAN_ID) or export (export PLAN_ID) a "
                     "reorganization plan",
        ["blockheat plan hplajw --policy best", "blockheat plan check PLAN_ID",
         "blockheat plan export PLAN_ID --format csv --out plan.csv"],
        description="blockheat plan TRACE_ID --policy POLICY builds a plan from the window's scorecard into "
                    "reorg_plans / reorg_plan_steps; blockheat plan check PLAN_ID verifies its hash and refuses a "
                    "stale plan (exit code 1 when refused or not found); blockheat plan export PLAN_ID --format "
                    "json|csv|parquet writes it (a dry run: this tool applies nothing); blockheat plan schema prints "
                    "the plan's JSON schema. --output-format json prints a built plan's whole document. A PLAN_ID "
                    "may be a unique prefix of 4 or more characters of the id.")
    pl.defer(_plan_arguments, by_first_word=dict.fromkeys(PLAN_VERBS, _stored_plan_arguments)) \
        .set_defaults(func=cmd_plan)


def _score_arguments(parser: argparse.ArgumentParser) -> None:
    from blockheat.jobs.policy_scores import add_arguments  # lazy: the job (pyspark) loads only for `score`

    parser.add_argument("trace_id", metavar="TRACE_ID", help="an ingested trace")
    add_arguments(parser)
    add_output_options(parser)


def _plan_arguments(parser: argparse.ArgumentParser) -> None:
    """Every option of `plan`: the job's build options (and its --now) and those of the stored-plan verbs."""
    from blockheat.jobs.reorg_plan import add_arguments  # lazy: the job (pyspark) loads only to build a plan

    _words_argument(parser)
    add_arguments(parser)
    _stored_plan_options(parser)


def _stored_plan_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `plan check`, `plan export` and `plan schema`, which load no job."""
    _words_argument(parser)
    from blockheat.libs.plans.document import NOW_OPTION  # lazy: pyarrow loads only for `plan`

    parser.add_argument("--now", **NOW_OPTION)
    _stored_plan_options(parser)


def _words_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("words", nargs="+", metavar="WORD",
                        help="TRACE_ID (build a plan), check PLAN_ID, export PLAN_ID, or schema")


def _stored_plan_options(parser: argparse.ArgumentParser) -> None:
    from blockheat.libs.plans.document import EXPORT_FORMATS  # lazy: pyarrow loads only for `plan`

    parser.add_argument("--format", choices=EXPORT_FORMATS, default="json", help="export format (default json)")
    parser.add_argument("--out", default=None, help="export file, a local path or a URI (default "
                                                    "<warehouse>/plans/PLAN_ID.FORMAT)")
    parser.add_argument("--file", default=None, help="check an exported plan file (a local path or a URI) instead "
                                                     "of a stored plan")
    add_output_options(parser, format_flag=False)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1%}"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:,.3g} ms"


def cmd_score(args: argparse.Namespace) -> int:
    from blockheat.jobs.policy_scores import config_from_args, run  # lazy: the job (pyspark) loads only for `score`

    try:
        job = config_from_args(args.trace_id, args)
    except (PolicyError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    spark, cfg = spark_session(args, f"score {args.trace_id}", trace_id=args.trace_id)
    try:
        summary = run(spark, cfg, job)
    except PolicyError as exc:
        raise UsageError(str(exc)) from exc
    costs = _costs(spark, cfg, args)
    rows = [{"rank": r["rank"], "policy_id": r["policy_id"], "mean_ms": r["mean_response_ms"],
             "p95_ms": r["p95_response_ms"], "vs_traced": r["improvement_mean"],
             "util_max_over_mean": r["utilization_max_over_mean"], "remaps": r["remaps"],
             "plannable": r["plannable"], **costs.get(r["policy_id"], dict.fromkeys(COST_COLUMNS))}
            for r in summary.rows]
    first = summary.rows[0]
    out = output(args)
    out.note(f"trace {first['trace_id']}, window {summary.window.window_id} ({first['window_requests']:,} requests), "
             f"{first['n_disks']} disks of {first['spec']}, {first['scheduler']}, speed-up {first['speedup']:g}\n")
    out.rows(rows, ["rank", "policy_id", "mean_ms", "p95_ms", "vs_traced", "util_max_over_mean", "remaps",
                    "plannable", *COST_COLUMNS], name="policies", units={"vs_traced": CHANGE})
    out.note("\ncost: the plan's moves, their bytes and their time on the modeled disks; net_s: response time saved "
             "over a window like this one minus that time; plan: its status under the default budgets "
             "(blockheat plan TRACE_ID --policy best keeps the largest net_s worth running)")
    notes = [f"  {r['policy_id']}: {r['note']}" for r in summary.rows if r["note"]]
    if notes:
        out.note("\nnotes:\n" + "\n".join(notes))
    if summary.skipped:
        out.note("\nnot applicable here: " + "; ".join(f"{k}: {v}" for k, v in summary.skipped.items()))
    if summary.pending:
        out.note("\nnot scored (no simulator support yet): "
                 + "; ".join(f"{k}: {v}" for k, v in summary.pending.items()))
    out.note(f"\ntables: policy_scores WHERE trace_id = '{first['trace_id']}' AND window_id = "
             f"'{summary.window.window_id}'; sim_results WHERE grid_id = '{summary.grid_id}'")
    return out.render()


COST_COLUMNS = ("moves", "moved_bytes", "move_s", "net_s", "plan")


def _costs(spark: Any, cfg: Any, args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Per plannable policy of the new scorecard, its plan's cost beside its benefit (jobs.reorg_plan.candidates,
    the default budgets; nothing stored)."""
    from blockheat.jobs.reorg_plan import PlanConfig, candidates  # lazy: the job (pyspark) loads only for `score`

    try:
        docs = candidates(spark, cfg, PlanConfig(args.trace_id, "best", args.window))
    except PolicyError:
        return {}                                   # nothing plannable among the scored families
    return {d["policy"]["policy_id"]: {"moves": d["cost_benefit"]["n_moves"],
                                       "moved_bytes": d["cost_benefit"]["bytes_to_move"],
                                       "move_s": d["cost_benefit"]["move_s"],
                                       "net_s": d["cost_benefit"]["net_s_per_window"], "plan": d["status"]}
            for d in docs}


def cmd_plan(args: argparse.Namespace) -> int:
    from blockheat.libs.plans.types import PlanError  # lazy: pyarrow loads only for `plan`

    words = args.words
    try:
        if words[0] == "schema":
            from blockheat.schemas.reorg_plan_json import PLAN_JSON_SCHEMA  # lazy: loads only for `plan schema`

            sys.stdout.write(json.dumps(PLAN_JSON_SCHEMA, indent=2) + "\n")
            return 0
        if words[0] == "check":
            return _check(args)
        if words[0] == "export":
            return _export(args)
        if len(words) != 1:
            close = difflib.get_close_matches(words[0], PLAN_VERBS, n=1, cutoff=0.6)
            hint = f"; did you mean plan {' '.join([close[0], *words[1:]])}?" if close else ""
            raise UsageError(f"plan {' '.join(words)}: expected TRACE_ID, check PLAN_ID, export PLAN_ID or schema"
                             + hint)
        return _build(args, words[0])
    except (PolicyError, PlanError) as exc:
        raise UsageError(str(exc)) from exc


def _plan_id(args: argparse.Namespace) -> str:
    if len(args.words) != 2:
        raise UsageError(f"plan {args.words[0]} needs exactly one PLAN_ID, got {args.words[1:]}")
    return str(args.words[1])


def _build(args: argparse.Namespace, trace_id: str) -> int:
    from blockheat.jobs.reorg_plan import config_from_args, run  # lazy: the job (pyspark) loads only for `plan`

    job = config_from_args(trace_id, args)
    spark, cfg = spark_session(args, f"plan {trace_id}", trace_id=trace_id)
    doc = run(spark, cfg, job)
    out = output(args)
    if args.output == "json":                     # the whole plan document
        out.render()                               # erases the progress line
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        return 0
    s, ev = doc["summary"], doc["evidence"]
    out.note(f"plan {doc['plan_id']}\n  policy {doc['policy']['policy_id']} on trace {trace_id}, window "
             f"{doc['inputs']['window']['window_id']}; created {doc['created_at']}, valid until {doc['valid_until']}\n"
             f"  status: {doc['status']}" + (f": {doc['reason']}" if doc["reason"] else "") + "\n"
             f"  steps: {s['n_steps']:,}, bytes to move: {human(s['bytes_to_move'], BYTES)}\n"
             f"  predicted mean response {_ms(ev['predicted']['mean_response_ms'])} against "
             f"{_ms(ev['baseline']['mean_response_ms'])} as traced ({_pct(ev['improvement']['mean_response'])})\n"
             f"  disk model validation demerit: {_ms(ev['validation']['demerit_ms'])}")
    if s["per_disk"] and s["n_steps"]:
        out.rows(s["per_disk"], ["device", "bytes_in", "bytes_out"], name="disks",
                 units={"bytes_in": BYTES, "bytes_out": BYTES})
    out.note(f"\ntables: reorg_plans, reorg_plan_steps WHERE plan_id = '{doc['plan_id']}'; nothing is applied "
             f"(blockheat plan export {doc['plan_id']} --format json)")
    return out.render()


def _check(args: argparse.Namespace) -> int:
    # lazy: the job's modules load only for `plan check`; it needs no Spark session
    from blockheat.libs.io import storage
    from blockheat.libs.plans.document import parse_utc, read_plan
    from blockheat.libs.plans.types import PlanRefusedError
    from blockheat.libs.table_io.plans import check

    warehouse = storage.warehouse_from_env()
    if args.file:
        if len(args.words) != 1:
            raise UsageError("plan check --file FILE takes no PLAN_ID")
        # check() compares it with the stored plan of its id (a CSV export's header is that plan's)
        doc, stored = read_plan(args.file, stored=lambda plan_id: _load(args, warehouse, plan_id)), None
    else:
        doc = stored = _load(args, warehouse, _plan_id(args))
    problems = check(warehouse, doc, parse_utc(args.now) if args.now else None, stored)
    name = doc.get("plan_id", args.file)
    if problems:
        raise PlanRefusedError(f"plan {name} refused: " + "; ".join(problems))
    return say(f"plan {name}: ok: hash verified, the stored plan, inputs unchanged, valid until {doc['valid_until']}, "
               f"{human(doc['summary']['bytes_to_move'], BYTES)} to move, within the limit; status {doc['status']}"
               + (f" ({doc['reason']})" if doc["reason"] else ""))


def _load(args: argparse.Namespace, warehouse: Any, plan_id: str) -> dict[str, Any]:
    """The stored plan `plan_id` (read without Spark unless delta-rs cannot read the table); NotFoundError (exit
    code 1, not a usage error) when there is none."""
    from blockheat.libs.io.delta_log import LogUnreadable
    from blockheat.libs.plans.types import PlanError
    from blockheat.libs.table_io.plans import load  # lazy: the plan store's modules load only for `plan`

    try:
        try:
            return load(warehouse, plan_id)
        except LogUnreadable:
            return load(warehouse, plan_id, spark_session(args, f"plan {args.words[0]}")[0])
    except PlanError as exc:
        if str(exc).startswith("no plan "):
            raise NotFoundError(str(exc)) from exc
        raise


def _export(args: argparse.Namespace) -> int:
    from blockheat.libs.io import storage
    from blockheat.libs.table_io.plans import export  # lazy: the plan store's modules load only for `plan export`

    plan_id = _plan_id(args)
    warehouse = storage.warehouse_from_env()
    doc = _load(args, warehouse, plan_id)
    plan_id = doc["plan_id"]                        # the whole id of a prefix
    path = export(doc, args.format, export_location(warehouse, plan_id, args.format, args.out))
    return say(f"plan {plan_id} ({doc['status']}, {doc['summary']['n_steps']:,} steps) written to {path} "
               f"({args.format}); dry run: nothing was applied")


def export_location(warehouse: str | Path, plan_id: str, fmt: str, out: str | None = None) -> str | Path:
    """Where `plan export` writes: --out (a local file, or a URI), else <warehouse>/plans/PLAN_ID.FORMAT on the
    warehouse's file system (a local directory or an object-store prefix). libs.plans.document.write_plan writes
    either (a local file's directory created)."""
    from blockheat.libs.io import storage  # lazy: pyarrow loads only for `plan`

    if out and storage.scheme(out) == "":
        return Path(out)
    where = storage.normalize(out) if out else storage.join(storage.normalize(warehouse), "plans", f"{plan_id}.{fmt}")
    return Path(where) if storage.is_local(where) else where
