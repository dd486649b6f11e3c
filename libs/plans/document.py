"""The reorganization plan document (schemas.reorg_plan_json): built from a policy's steps and its evidence, its
ids, the staleness check, its table rows and the export formats. Pure logic apart from write_plan and read_plan (the
export files); libs.plans.steps computes the steps and jobs/reorg_plan.py reads the inputs and writes the tables.
It loads neither numpy nor the simulator, so `blockheat plan check` answers in a fraction of a second.

    doc = build_plan(PlanInputs(...), part)                    # ids computed, schema-valid
    problems = check_plan(doc, now=now, versions={"sim_results": 7, ...})   # [] = may be reviewed / applied
    write_plan(doc, Path("plan.json"), "json"); read_plan(Path("plan.json")) == doc
    write_plan(doc, Path("plan.csv"), "csv"); read_plan(Path("plan.csv"), stored=load) == doc   # steps only

Choices (each tested in tests/jobs/test_reorg_plan.py):
- plan_id is the SHA-256 of the canonical JSON (sorted keys, no spaces, ASCII) of the whole document
  without plan_id: created_at and valid_until are covered, so extending a plan's validity is an edit
  that `plan check` detects; created_at is an input (--now; the DAG passes its logical date), so the
  same inputs at the same time give the same id. content_id leaves out plan_id, content_id, created_at
  and valid_until: the same decision on another day has the same content_id.
- non-finite figures (a saturated run's +inf response) are null in the document; `saturated` says why.
- per-disk bytes: out = bytes of steps reading the disk, in = bytes of steps writing it (stage steps
  count, so staged data counts twice); align_to_track steps move nothing and count in neither, nor in
  bytes_to_move.
- ALIS: the document's `lookaside` section lists the areas and the directory; its entries are derived from the
  copy steps, so CSV and Parquet exports carry them in the step rows and the header holds only the areas.
- a plan proposes steps only when the simulated mean response improves on as-traced by at least
  min_improvement (default 1 %) and the policy's run is not saturated; otherwise status no_improvement,
  no steps, and the reason gives the figures;
- every plan carries its cost against its benefit (cost_benefit, libs.plans.cost); a proposal over a budget is
  status not_worth_it, no steps, the reason naming each breach with its numbers.
"""
from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
import json
import math
import numbers
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from blockheat.libs.io import storage
from blockheat.libs.plans.cost import MoveBudget, breaches, cost_benefit
from blockheat.libs.plans.types import BASELINE, PlanError, PlanPart, SafetyLimits, Step, Target, Variant
from blockheat.schemas import reorg_plan_steps as STEPS
from blockheat.schemas.reorg_plan_json import SCHEMA_VERSION, schema_errors, validate_plan_document

__all__ = ["EXPORT_FORMATS", "PlanInputs", "build_plan", "canonical_json", "check_plan", "document_from_rows",
           "finite", "first_difference", "iso_utc", "loads_strict", "lookaside_entries", "no_improvement_reason",
           "parse_utc", "plan_ids", "plan_rows", "plan_scope", "read_plan", "write_plan"]

EXPORT_FORMATS = ("json", "csv", "parquet")
DEVICE_BYTES_SOURCE = "highest byte the trace addresses on the device (space beyond is taken as free)"
APPLIES = "nothing: this tool never moves data; export and check are dry runs for review"
PARQUET_KEY = b"blockheat.plan"
_UNHASHED_FOR_CONTENT = ("plan_id", "content_id", "created_at", "valid_until")


def lookaside_entries(steps: Sequence[Mapping[str, Any]], areas: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The lookaside directory (home extent -> reorganized-area location) from a plan's copy steps (dicts
    with step, step_type, group_id, source_device, source_offset_bytes, dest_offset_bytes, bytes, extent)."""
    start = {a["device"]: int(a["ra_start_bytes"]) for a in areas}
    out = []
    for s in steps:
        if s["step_type"] not in ("copy_run", "copy_heat_unit"):
            continue
        dev = s["source_device"]
        run = s["step_type"] == "copy_run"
        out.append({"step": s["step"], "device": dev, "region": "run" if run else "heat",
                    "run_id": int(s["group_id"].rsplit(":run-", 1)[1]) if run else None, "unit_id": s["extent"],
                    "home_offset_bytes": s["source_offset_bytes"], "size_bytes": s["bytes"],
                    "ra_offset_bytes": s["dest_offset_bytes"] - start[dev], "ra_address_bytes": s["dest_offset_bytes"]})
    return out



def finite(x: Any) -> Any:
    """JSON has no infinity: non-finite floats become null (saturated figures carry a `saturated` flag)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _clean(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, numbers.Integral) and not isinstance(value, int):     # numpy's integers
        return int(value)
    if isinstance(value, numbers.Real) and not isinstance(value, int) and type(value) is not float:   # numpy's floats
        return finite(float(value))
    return finite(value)


def canonical_json(doc: Any) -> str:
    """Sorted keys, no spaces, ASCII, no NaN/infinity: the bytes the ids hash."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def loads_strict(text: str | bytes, where: str) -> Any:
    """JSON text parsed strictly: a key repeated in any object (at any depth) or NaN / Infinity is a PlanError
    naming `where` (json.loads alone keeps a repeated key's last value, so a forged first value would go unseen)."""
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise PlanError(f"{where}: duplicate key {key!r} in a JSON object")
            out[key] = value
        return out

    def constant(name: str) -> Any:
        raise PlanError(f"{where}: {name} is not a JSON value")

    return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The first field path (`steps[3].dest_offset_bytes`, `valid_until`) where two documents differ in canonical
    form (canonical_json), None where they do not. Keys in sorted order, except that at the top level plan_id and
    content_id (hashes of the rest) come last; a key or list item present in one only is a difference at its path."""
    if canonical_json(a) == canonical_json(b):
        return None
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        keys = sorted(set(a) | set(b), key=lambda k: (not path and k in ("plan_id", "content_id"), k))
        for key in keys:
            where = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                return where
            found = first_difference(a[key], b[key], where)
            if found is not None:
                return found
    elif isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            if i >= len(a) or i >= len(b):
                return f"{path}[{i}]"
            found = first_difference(a[i], b[i], f"{path}[{i}]")
            if found is not None:
                return found
    return path or "(the whole document)"


def _sha(doc: Any) -> str:
    return hashlib.sha256(canonical_json(doc).encode("ascii")).hexdigest()


def plan_ids(doc: Mapping[str, Any]) -> tuple[str, str]:
    """(plan_id, content_id) of a document (any plan_id or content_id in it is ignored)."""
    content = _sha({k: v for k, v in doc.items() if k not in _UNHASHED_FOR_CONTENT})
    body = {k: v for k, v in doc.items() if k != "plan_id"}
    body["content_id"] = content
    return _sha(body), content


def iso_utc(t: dt.datetime) -> str:
    if t.tzinfo is None:
        raise PlanError(f"time {t} has no time zone (plans use UTC)")
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


#: argparse's keywords of --now, the reference time of building a plan (its created_at) and of checking one: the
#: plan job's and every `blockheat plan` verb's (parse_utc reads it).
NOW_OPTION: dict[str, Any] = {"default": None, "help": "ISO-8601 (default: now, UTC): the plan's created_at when "
                                                       "building, the time a check is made at"}


def parse_utc(text: str) -> dt.datetime:
    """ISO-8601 (a trailing Z or an offset; no zone: UTC) -> an aware datetime."""
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise PlanError(f"time {text!r} is not ISO-8601 (e.g. 2026-01-02T03:04:05Z)") from exc
    return t if t.tzinfo is not None else t.replace(tzinfo=dt.UTC)


_FIGURE_KEYS = ("saturated", "mean_response_ms", "p95_response_ms", "p99_response_ms", "mean_service_ms",
                "mean_queue_ms", "hottest_utilization", "utilization_max_over_mean", "migration_mb", "remaps")


@dataclass(frozen=True)
class PlanInputs:
    """Everything a plan is built from. score / baseline: their policy_scores rows; sim / baseline_sim:
    their sim_results rows (scenario_json, disk_physical_ios, disk_utilization, simulated_s); tables: the
    Delta versions read; validation: the evidence's validation section."""

    target: Target
    variant: Variant
    description: str
    window: Mapping[str, Any]
    tables: Mapping[str, int]
    score: Mapping[str, Any]
    baseline: Mapping[str, Any]
    sim: Mapping[str, Any]
    baseline_sim: Mapping[str, Any]
    validation: Mapping[str, Any]
    created_at: dt.datetime
    valid_for: dt.timedelta = dt.timedelta(hours=24)
    limits: SafetyLimits = field(default_factory=SafetyLimits)
    min_improvement: float = 0.01
    idle: Mapping[str, Any] | None = None          # the window's idle time per device (libs.plans.cost); None: not
    # measured
    budget: MoveBudget = field(default_factory=MoveBudget)


def _balance(sim_row: Mapping[str, Any], window_s: float) -> dict[str, Any]:
    ios = [float(x) for x in sim_row["disk_physical_ios"]]
    per_disk = [x / window_s for x in ios] if window_s > 0 else [0.0 for _ in ios]
    mean = sum(per_disk) / len(per_disk) if per_disk else 0.0
    return {"per_disk": per_disk, "utilization": [finite(float(u)) for u in sim_row["disk_utilization"]],
            "max_over_mean": max(per_disk) / mean if mean > 0 else None}


def no_improvement_reason(inp: PlanInputs, steps: Sequence[Step] | None = None) -> str | None:
    """Why the plan proposes nothing, or None when it proposes its steps (steps None: not built yet)."""
    pid = inp.variant.policy_id
    if inp.variant.family == BASELINE:
        return f"{pid} is the current layout: nothing to move"
    p, b = inp.score["mean_response_ms"], inp.baseline["mean_response_ms"]
    if inp.score["saturated"]:
        return (f"{pid} saturates the array in the simulator over window {inp.window['window_id']}; no moves are "
                "proposed")
    imp = inp.score["improvement_mean"]
    if imp is not None and imp < inp.min_improvement:
        return (f"{pid}: simulated mean response {p:.4g} ms against {b:.4g} ms as traced over window "
                f"{inp.window['window_id']} ({imp:+.1%}), below the minimum improvement of "
                f"{inp.min_improvement:.1%}; no moves are proposed")
    if steps is not None and not steps:
        return f"{pid}: the simulated layout equals the current one; nothing to move"
    return None


def build_plan(inp: PlanInputs, part: PlanPart) -> dict[str, Any]:
    """The plan document (schemas.reorg_plan_json) with its ids."""
    t, v = inp.target, inp.variant
    reason = no_improvement_reason(inp, part.steps)
    status = "no_improvement" if reason is not None else "proposed"
    costs = cost_benefit(t, part.steps if reason is None else [], idle=inp.idle, window=inp.window, score=inp.score,
                         baseline=inp.baseline, validation_demerit_ms=inp.validation.get("demerit_ms"),
                         throttle_mb_per_s=inp.limits.throttle_mb_per_s, budget=inp.budget)
    over = breaches(costs, inp.budget, inp.limits.max_bytes) if reason is None else []
    if over:
        status = "not_worth_it"
        imp = inp.score["improvement_mean"]
        reason = (f"{v.policy_id}: not worth running: " + "; ".join(over) + f" (for {imp:+.1%} mean response over "
                  f"window {inp.window['window_id']}); no moves are proposed")
    steps = [] if reason is not None else list(part.steps)
    per_disk = {d: {"device": d, "bytes_in": 0, "bytes_out": 0} for d in t.devices}
    moving = [s for s in steps if s.step_type not in STEPS.NO_DATA_STEP_TYPES]
    for s in moving:
        per_disk[s.source_device]["bytes_out"] += s.bytes
        per_disk[s.dest_device]["bytes_in"] += s.bytes
    moved = sum(s.bytes for s in moving)
    window_s = (inp.window["end_us"] - inp.window["start_us"]) / 1e6
    devices = [{"device": d, "disk": k, "bytes": n * t.sector_bytes}
               for k, (d, n) in enumerate(zip(t.devices, t.device_sectors, strict=True))]
    start = {"kind": "as-traced", "sector_bytes": t.sector_bytes, "devices": devices}
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "created_at": iso_utc(inp.created_at),
        "valid_until": iso_utc(inp.created_at + inp.valid_for),
        "status": status,
        "reason": reason,
        "target": {
            "trace_id": t.trace_id, "array_group": str(inp.sim["array_group"]), "devices": devices,
            "device_bytes_source": DEVICE_BYTES_SOURCE,
            "array": {"n_disks": t.n_disks, "spec": t.spec.name, "sector_bytes": t.sector_bytes,
                      "capacity_bytes": t.capacity_sectors * t.sector_bytes, "cylinders": int(t.spec.cylinders),
                      "surfaces": int(t.spec.surfaces), "rpm": float(t.spec.rpm), "scheduler": t.scheduler,
                      "speedup": float(t.speedup)},
            "start_layout": {"kind": "as-traced", "fingerprint": _sha(start)},
        },
        "inputs": {"trace_id": t.trace_id, "window": dict(inp.window), "tables": dict(sorted(inp.tables.items()))},
        "policy": {"policy_id": v.policy_id, "family": v.family, "description": inp.description,
                   "params": dict(v.params)},
        "steps": [{"step": k, **{c: (list(x) if isinstance(x, tuple) else x) for c, x in asdict(s).items()}}
                  for k, s in enumerate(steps)],
        "summary": {"n_steps": len(steps), "bytes_to_move": moved, "per_disk": list(per_disk.values()),
                    "heat_balance": {"metric": "physical I/Os per second per disk over the window (simulated); "
                                               "utilization = busy share",
                                     "before": _balance(inp.baseline_sim, window_s),
                                     "after": _balance(inp.sim, window_s)}},
        "safety": {**asdict(inp.limits), "within_limits": moved <= inp.limits.max_bytes,
                   "estimated_copy_s": moved / (inp.limits.throttle_mb_per_s * 1e6), "applies": APPLIES},
        "evidence": {
            "grid_id": str(inp.sim["grid_id"]), "scenario_id": str(inp.sim["scenario_id"]),
            "baseline_scenario_id": str(inp.baseline_sim["scenario_id"]),
            "scenario": json.loads(inp.sim["scenario_json"]), "window": dict(inp.window),
            "predicted": {k: inp.score[k] for k in _FIGURE_KEYS},
            "baseline": {k: inp.baseline[k] for k in _FIGURE_KEYS},
            "improvement": {"mean_response": inp.score["improvement_mean"],
                            "p95_response": inp.score["improvement_p95"]},
            "validation": dict(inp.validation),
        },
        "detail": part.detail if reason is None else {},
        "cost_benefit": costs,
    }
    if part.lookaside is not None and reason is None:
        doc["lookaside"] = {"areas": part.lookaside, "entries": lookaside_entries(doc["steps"], part.lookaside)}
    doc = _clean(doc)
    plan_id, content_id = plan_ids(doc)
    doc = {"plan_id": plan_id, "content_id": content_id, **doc}
    validate_plan_document(doc)
    return doc


def plan_scope(doc: Mapping[str, Any]) -> dict[str, str]:
    """The rows a plan read, as column = value: its trace, its window and its scored grid (a commit to an
    input table that replaced only other rows leaves the plan fresh; see libs.io.table_versions.scoped_version)."""
    return {"trace_id": str(doc["target"]["trace_id"]), "window_id": str(doc["inputs"]["window"]["window_id"]),
            "grid_id": str(doc["evidence"]["grid_id"])}


def check_plan(doc: Mapping[str, Any], *, now: dt.datetime, versions: Mapping[str, int | None]) -> list[str]:
    """Why the plan must not be applied (empty: it may): a document that breaks the schema, ids that do not
    match its contents, valid_until passed, an input table whose rows in the plan's scope changed after the
    version the plan read (versions: table -> the latest version changing them, libs.io.table_versions.scoped_version
    with since = the version read; None: gone or recreated), more bytes than its limit."""
    errors = schema_errors(doc)
    if errors:
        return [f"not a valid plan document: {'; '.join(errors[:5])}"]
    problems = []
    plan_id, content_id = plan_ids(doc)
    if plan_id != doc["plan_id"] or content_id != doc["content_id"]:
        problems.append(f"hash mismatch: the document hashes to {plan_id}, it claims {doc['plan_id']} (edited "
                        f"after it was built)")
    until = parse_utc(doc["valid_until"])
    if now > until:
        problems.append(f"stale: valid until {doc['valid_until']}, now {iso_utc(now)}")
    for table, version in doc["inputs"]["tables"].items():
        current = versions.get(table)
        if current is None or current > version:
            now_at = "now gone or recreated" if current is None else f"changed in version {current}"
            problems.append(f"stale: input table {table} changed since the plan read it (read version {version}, "
                            f"{now_at})")
    if not doc["safety"]["within_limits"] or doc["summary"]["bytes_to_move"] > doc["safety"]["max_bytes"]:
        problems.append(f"over limit: moves {doc['summary']['bytes_to_move']} bytes, the limit is "
                        f"{doc['safety']['max_bytes']}")
    return problems


def plan_rows(doc: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the reorg_plans row, the reorg_plan_steps rows) of a document."""
    ev = doc["evidence"]
    row = {"trace_id": doc["target"]["trace_id"], "plan_id": doc["plan_id"], "content_id": doc["content_id"],
           "schema_version": doc["schema_version"], "created_at": doc["created_at"],
           "valid_until": doc["valid_until"], "window_id": doc["inputs"]["window"]["window_id"],
           "policy_id": doc["policy"]["policy_id"], "family": doc["policy"]["family"], "status": doc["status"],
           "reason": doc["reason"], "n_steps": doc["summary"]["n_steps"],
           "bytes_to_move": doc["summary"]["bytes_to_move"],
           "predicted_mean_response_ms": ev["predicted"]["mean_response_ms"],
           "baseline_mean_response_ms": ev["baseline"]["mean_response_ms"],
           "improvement_mean": ev["improvement"]["mean_response"],
           "validation_demerit_ms": ev["validation"]["demerit_ms"], "plan_json": canonical_json(doc)}
    steps = [{"trace_id": row["trace_id"], "plan_id": doc["plan_id"], **s} for s in doc["steps"]]
    return row, steps


# --- export ----------------------------------------------------------------------------------------------------

_STEP_KINDS = {name: kind for name, kind, _ in STEPS.FIELDS}


def _header(doc: Mapping[str, Any]) -> str:
    """The document without its steps (the rows) and without the lookaside entries (derived from the rows)."""
    head = {k: v for k, v in doc.items() if k != "steps"}
    if "lookaside" in head:
        head["lookaside"] = {k: v for k, v in head["lookaside"].items() if k != "entries"}
    return canonical_json(head)


def write_plan(doc: Mapping[str, Any], path: str | Path, fmt: str) -> Path | str:
    """Write the plan: json (the document), csv (the steps table: a line of the reorg_plan_steps columns, then one
    row per step, depends_on as 1;2;3; each row names its trace and plan, the rest of the document is the stored
    plan's) or parquet (the steps, the header in the schema metadata under blockheat.plan). The header leaves out
    the lookaside entries: the copy steps' rows carry them. Each reads back to the same document (read_plan).
    `path`: a local file (its directory created) or an object-store URI (libs.io.storage: one PUT); returns it (a
    Path when local)."""
    if fmt not in EXPORT_FORMATS:
        raise PlanError(f"export format {fmt!r}: use one of {list(EXPORT_FORMATS)}")
    _, steps = plan_rows(doc)
    if fmt == "json":
        data = (json.dumps(doc, sort_keys=True, indent=2, allow_nan=False) + "\n").encode()
    elif fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(STEPS.COLUMNS)
        for s in steps:
            writer.writerow([_csv_cell(s[c]) for c in STEPS.COLUMNS])
        data = buf.getvalue().encode()
    else:
        table = pa.Table.from_pylist(steps, schema=STEPS.ARROW_SCHEMA)
        sink = pa.BufferOutputStream()
        pq.write_table(table.replace_schema_metadata({PARQUET_KEY: _header(doc).encode("ascii")}), sink)
        data = sink.getvalue().to_pybytes()
    local = _local_path(path)
    if local is None:
        where = storage.normalize(path)
        storage.write_bytes(where, data)
        return where
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_bytes(data)
    return local


def _local_path(path: str | Path) -> Path | None:
    """A local file's path (a file:// URI's too); None for an object-store URI."""
    kind = storage.scheme(path)
    if kind == "":
        return Path(path)
    return Path(storage.normalize(path)) if kind == "file" else None


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ";".join(str(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _csv_value(name: str, text: str, where: str) -> Any:
    kind = _STEP_KINDS[name]
    try:
        if kind == "array<long>":
            return [int(x) for x in text.split(";")] if text else []
        if text == "" and kind != "string":
            return None
        if kind == "long":
            return int(text)
        if kind == "double":
            return float(text)
    except ValueError as exc:
        raise PlanError(f"{where}: column {name}: {text!r} is not a {kind}") from exc
    return None if text == "" and name == "note" else text


def read_plan(path: str | Path, fmt: str | None = None, *,
              stored: Callable[[str], Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """A plan written by write_plan (format from the extension unless given), from a local file or an
    object-store URI (libs.io.storage), parsed strictly: a key repeated in the JSON (the export, the Parquet header
    metadata) is refused, the CSV and Parquet step columns must be reorg_plan_steps' (names, order, Parquet types),
    and every step row's trace_id and plan_id must be the header's target.trace_id and plan_id. A CSV export holds
    the steps only: its header is the one of the stored plan its rows name (`stored`: plan id -> that document).
    Errors (PlanError) name the file and the line, row or key."""
    path = _local_path(path) or storage.normalize(path)
    fmt = fmt or os.path.splitext(os.fspath(path))[1].lstrip(".").lower()
    if fmt not in EXPORT_FORMATS:
        raise PlanError(f"{path}: unknown plan format {fmt!r} (use {', '.join(EXPORT_FORMATS)})")
    try:
        data = storage.read_bytes(os.fspath(path))
        if fmt == "json":
            doc = loads_strict(data, str(path))
            if not isinstance(doc, dict):
                raise PlanError(f"{path}: not a plan document (a JSON object), got {type(doc).__name__}")
            return doc
        if fmt == "csv":
            reader = csv.reader(data.decode().splitlines())
            header = next(reader, None)
            if header is None or tuple(header) != STEPS.COLUMNS:
                raise PlanError(f"{path}: line 1 must be the step columns {list(STEPS.COLUMNS)} (a blockheat plan "
                                "export)")
            rows = []
            for n, cells in enumerate(reader, start=2):
                if len(cells) != len(header):
                    raise PlanError(f"{path}: line {n}: {len(cells)} cells, expected {len(header)}")
                rows.append({c: _csv_value(c, x, f"{path}: line {n}") for c, x in zip(header, cells, strict=True)})
            return _with_step_rows(_stored_header(rows, stored, str(path)), rows, f"{path}: the stored plan",
                                   lambda i: f"{path}: line {i + 2}")
        table = pq.read_table(pa.BufferReader(data))
        meta = (table.schema.metadata or {}).get(PARQUET_KEY)
        if meta is None:
            raise PlanError(f"{path}: no {PARQUET_KEY.decode()} metadata (not a blockheat plan export)")
        _check_step_columns(table.schema, str(path))
        head = loads_strict(meta, f"{path}: {PARQUET_KEY.decode()} metadata")
        return _with_step_rows(head, table.to_pylist(), f"{path}: {PARQUET_KEY.decode()} metadata",
                               lambda i: f"{path}: row {i} (from 0)")
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, pa.ArrowException) as exc:
        raise PlanError(f"{path}: cannot read the plan: {exc}") from exc


def _stored_header(rows: Sequence[Mapping[str, Any]], stored: Callable[[str], Mapping[str, Any]] | None,
                   where: str) -> Any:
    """The header of the stored plan a CSV export's rows name (the first row's plan_id; _with_step_rows checks
    every row against it)."""
    if not rows:
        raise PlanError(f"{where}: no step rows, so no plan id: check the plan by its id, or export it as json")
    if stored is None:
        raise PlanError(f"{where}: a CSV export holds the steps only; read it with the stored plans")
    return json.loads(_header(stored(str(rows[0]["plan_id"]))))


def _check_step_columns(schema: pa.Schema, where: str) -> None:
    """The Parquet export's columns must be reorg_plan_steps' columns, in order, with their types."""
    names = tuple(schema.names)
    if names != STEPS.COLUMNS:
        missing = [c for c in STEPS.COLUMNS if c not in names]
        extra = [c for c in names if c not in STEPS.COLUMNS]
        raise PlanError(f"{where}: the step columns must be {list(STEPS.COLUMNS)}, got {list(names)} (missing "
                        f"{missing}, extra {extra})")
    for want in STEPS.ARROW_SCHEMA:
        got = schema.field(want.name).type
        if got != want.type:
            raise PlanError(f"{where}: column {want.name} is {got}, expected {want.type}")


def _with_step_rows(head: Any, rows: Sequence[Mapping[str, Any]], where: str,
                    place: Callable[[int], str]) -> dict[str, Any]:
    """The document from its header (the document without steps and lookaside entries, _header) and its step
    rows (reorg_plan_steps columns, in order): each row's trace_id and plan_id must be the header's target.trace_id
    and plan_id (PlanError naming place(row index) and the column); the lookaside entries are rebuilt from the
    copy steps. `where` names the header in errors."""
    if not isinstance(head, dict):
        raise PlanError(f"{where}: not a plan header (a JSON object), got {type(head).__name__}")
    lookaside = head.get("lookaside")
    if "steps" in head or (isinstance(lookaside, dict) and "entries" in lookaside):
        key = "steps" if "steps" in head else "lookaside.entries"
        raise PlanError(f"{where}: the header carries {key}, which the step rows hold")
    target = head.get("target")
    ids = {"trace_id": ("target.trace_id", target.get("trace_id") if isinstance(target, dict) else None),
           "plan_id": ("plan_id", head.get("plan_id"))}
    for name, value in ids.values():
        if not isinstance(value, str):
            raise PlanError(f"{where}: the header has no {name} (a string), got {value!r}")
    steps = []
    for i, row in enumerate(rows):
        missing = [c for c in STEPS.COLUMNS if c not in row]
        if missing or len(row) != len(STEPS.COLUMNS):
            raise PlanError(f"{place(i)}: the step columns must be {list(STEPS.COLUMNS)}, got {list(row)}")
        for column, (name, value) in ids.items():
            if row[column] != value:
                raise PlanError(f"{place(i)}: column {column} is {row[column]!r}, the plan's {name} is {value!r}")
        steps.append({k: v for k, v in row.items() if k not in ids})
    doc = {**head, "steps": steps}
    if isinstance(lookaside, dict) and "areas" in lookaside:
        try:
            doc["lookaside"] = {**lookaside, "entries": lookaside_entries(steps, lookaside["areas"])}
        except (KeyError, IndexError, ValueError, TypeError, AttributeError) as exc:
            raise PlanError(f"{where}: the lookaside directory cannot be rebuilt from the copy steps: {exc!r}") \
                from exc
    return doc


def document_from_rows(row: Mapping[str, Any], step_rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A stored plan's document recomputed from its rows: the reorg_plans row's plan_json (parsed strictly) with
    its steps from the reorg_plan_steps rows (in step order). The rows must be exactly the document's (plan_rows),
    every column compared, plan_json byte for byte: else PlanError naming the table, the row and the column (for
    plan_json, the first differing field)."""
    name = f"reorg_plans row {row.get('plan_id')}"
    stored = loads_strict(row["plan_json"], f"{name}: plan_json")
    if not isinstance(stored, dict):
        raise PlanError(f"{name}: plan_json is not a plan document (a JSON object)")
    if stored.get("plan_id") != row.get("plan_id"):
        raise PlanError(f"{name} holds a document claiming id {stored.get('plan_id')!r}")
    n_steps = len(stored["steps"]) if isinstance(stored.get("steps"), list) else None
    if n_steps != len(step_rows):
        raise PlanError(f"{name}: reorg_plan_steps holds {len(step_rows)} rows of the plan, its plan_json "
                        f"{n_steps if n_steps is not None else 'no'} steps")
    head = {k: v for k, v in stored.items() if k != "steps"}
    if isinstance(head.get("lookaside"), dict):
        head["lookaside"] = {k: v for k, v in head["lookaside"].items() if k != "entries"}
    ordered = sorted(step_rows, key=lambda r: r["step"] if isinstance(r.get("step"), int) else -1)
    doc = _with_step_rows(head, ordered, f"{name}: plan_json",
                          lambda i: f"reorg_plan_steps row step {ordered[i].get('step')} of plan {row.get('plan_id')}")
    try:
        want, _ = plan_rows(doc)
    except (KeyError, TypeError) as exc:
        raise PlanError(f"{name}: plan_json is not a plan document: no field {exc}") from exc
    if row["plan_json"] != want["plan_json"]:
        at = first_difference(stored, doc)
        raise PlanError(f"{name}: plan_json differs from the reorg_plan_steps rows at {at}"
                        if at else f"{name}: plan_json is not in canonical form (canonical_json)")
    for column, value in want.items():
        if column not in row or row[column] != value:
            raise PlanError(f"{name}: column {column} is {row.get(column)!r}, its plan_json gives {value!r}")
    extra = sorted(set(row) - set(want))
    if extra:
        raise PlanError(f"{name}: columns {extra} are not reorg_plans columns")
    return doc
