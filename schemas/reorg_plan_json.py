"""The JSON schema of an exported reorganization plan (`blockheat plan export`, the `plan_json` column of
`reorg_plans`), draft 2020-12, and a small validator for the subset it uses (type, enum, pattern, minimum,
required, properties, additionalProperties, items, $ref into $defs), so checking a plan needs no extra
package. `blockheat plan schema` prints it.

    validate_plan_document(json.loads(text))      # PlanDocumentError names the place, e.g. plan.steps[3].bytes
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from blockheat.schemas.reorg_plan_steps import STEP_TYPES
from blockheat.schemas.reorg_plans import STATUSES

SCHEMA_VERSION = 1

_HASH = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
_TIME = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$"}
_COUNT = {"type": "integer", "minimum": 0}
_NUM = {"type": ["number", "null"]}          # null: not finite (a saturated run) or not measured
_STR = {"type": "string"}


def _obj(properties: Mapping[str, Any], required: list[str] | None = None, *, extra: Any = False) -> dict[str, Any]:
    """An object with these properties, all required unless listed otherwise, no others (unless extra)."""
    return {"type": "object", "properties": dict(properties),
            "required": list(properties) if required is None else required, "additionalProperties": extra}


_WINDOW = _obj({"window_id": _STR, "start_us": _COUNT, "end_us": _COUNT, "requests": _COUNT})
_FIGURES = _obj({"saturated": {"type": "boolean"}, "mean_response_ms": _NUM, "p95_response_ms": _NUM,
                 "p99_response_ms": _NUM, "mean_service_ms": _NUM, "mean_queue_ms": _NUM,
                 "hottest_utilization": _NUM, "utilization_max_over_mean": _NUM, "migration_mb": _NUM,
                 "remaps": _COUNT})
_BALANCE = _obj({"per_disk": {"type": "array", "items": _NUM}, "utilization": {"type": "array", "items": _NUM},
                 "max_over_mean": _NUM})
_STEP = _obj({
    "step": _COUNT, "step_type": {"enum": list(STEP_TYPES)}, "group_id": _STR,
    "source_device": _STR, "source_offset_bytes": _COUNT, "dest_device": _STR, "dest_offset_bytes": _COUNT,
    "bytes": {"type": "integer", "minimum": 1}, "depends_on": {"type": "array", "items": _COUNT},
    "extent": {"type": ["integer", "null"], "minimum": 0}, "unit_bytes": {"type": ["integer", "null"], "minimum": 1},
    "width": {"type": ["integer", "null"], "minimum": 1}, "time_us": _NUM, "note": {"type": ["string", "null"]},
})

PLAN_JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://blockheat.invalid/schemas/reorg-plan-v1.json",
    "title": "blockheat reorganization plan",
    "description": "A reviewable, never self-applied data-layout plan: target, inputs, policy, ordered steps, "
                   "summary, safety limits and the simulator's evidence; detail is the family's own section "
                   "(striping: unit and width per device; extent_map; cooling_moves in execution order; io_shaping: "
                   "track alignment's host-side rule and track zones per device; alis: the placement's window). "
                   "lookaside (ALIS plans only): each device's reorganized area and the lookaside directory, "
                   "home extent -> area location, one entry per copy step. "
                   "plan_id = SHA-256 of the canonical JSON (sorted keys, no spaces) of the document without "
                   "plan_id.",
    "$defs": {"window": _WINDOW, "figures": _FIGURES, "balance": _BALANCE, "step": _STEP},
    **_obj({
        "lookaside": _obj({
            "areas": {"type": "array", "items": _obj({"device": _STR, "volume_bytes": _COUNT, "ra_start_bytes": _COUNT,
                                                       "ra_bytes": _COUNT, "ra_used_bytes": _COUNT})},
            "entries": {"type": "array", "items": _obj({
                "step": _COUNT, "device": _STR, "region": {"enum": ["run", "heat"]},
                "run_id": {"type": ["integer", "null"], "minimum": 0}, "unit_id": _COUNT,
                "home_offset_bytes": _COUNT, "size_bytes": {"type": "integer", "minimum": 1},
                "ra_offset_bytes": _COUNT, "ra_address_bytes": _COUNT})},
        }),
        "plan_id": _HASH,
        "content_id": _HASH,
        "schema_version": {"enum": [SCHEMA_VERSION]},
        "created_at": _TIME,
        "valid_until": _TIME,
        "status": {"enum": list(STATUSES)},
        "reason": {"type": ["string", "null"]},
        "target": _obj({
            "trace_id": _STR, "array_group": _STR,
            "devices": {"type": "array", "items": _obj({"device": _STR, "disk": _COUNT, "bytes": _COUNT})},
            "device_bytes_source": _STR,
            "array": _obj({"n_disks": {"type": "integer", "minimum": 1}, "spec": _STR,
                           "sector_bytes": {"type": "integer", "minimum": 1}, "capacity_bytes": _COUNT,
                           "cylinders": _COUNT, "surfaces": _COUNT, "rpm": {"type": "number"}, "scheduler": _STR,
                           "speedup": {"type": "number"}}),
            "start_layout": _obj({"kind": _STR, "fingerprint": _HASH}),
        }),
        "inputs": _obj({"trace_id": _STR, "window": {"$ref": "#/$defs/window"},
                        "tables": {"type": "object", "additionalProperties": _COUNT}}),
        "policy": _obj({"policy_id": _STR, "family": _STR, "description": _STR,
                        "params": {"type": "object"}}),
        "steps": {"type": "array", "items": {"$ref": "#/$defs/step"}},
        "summary": _obj({
            "n_steps": _COUNT, "bytes_to_move": _COUNT,
            "per_disk": {"type": "array", "items": _obj({"device": _STR, "bytes_in": _COUNT, "bytes_out": _COUNT})},
            "heat_balance": _obj({"metric": _STR, "before": {"$ref": "#/$defs/balance"},
                                  "after": {"$ref": "#/$defs/balance"}}),
        }),
        "safety": _obj({"max_bytes": _COUNT, "max_concurrent_moves_per_disk": {"type": "integer", "minimum": 1},
                        "throttle_mb_per_s": {"type": "number", "minimum": 0}, "within_limits": {"type": "boolean"},
                        "estimated_copy_s": {"type": "number", "minimum": 0}, "applies": _STR}),
        "evidence": _obj({
            "grid_id": _STR, "scenario_id": _STR, "baseline_scenario_id": _STR, "scenario": {"type": "object"},
            "window": {"$ref": "#/$defs/window"}, "predicted": {"$ref": "#/$defs/figures"},
            "baseline": {"$ref": "#/$defs/figures"},
            "improvement": _obj({"mean_response": _NUM, "p95_response": _NUM}),
            "validation": _obj({"available": {"type": "boolean"}, "method": _STR, "spec": _STR,
                                "demerit_ms": _NUM, "reason": {"type": ["string", "null"]},
                                "per_device": {"type": "array", "items": _obj({
                                    "device": _STR, "requests": _COUNT, "measured_mean_ms": _NUM,
                                    "simulated_mean_ms": _NUM, "demerit_ms": _NUM})}}),
        }),
        "detail": _obj({
            "striping": {"type": "array", "items": _obj(
                {"device": _STR, "unit_bytes": _COUNT, "width": _COUNT, "stripe_width": _COUNT, "first_disk": _COUNT,
                 "logical_offset_bytes": _COUNT, "bytes": _COUNT, "bytes_moved": _COUNT},
                required=["device", "unit_bytes", "width"])},
            "extent_map": _obj({"extents": _COUNT, "extents_moved": _COUNT, "extents_staged": _COUNT}),
            "cooling_moves": {"type": "array", "items": _obj(
                {"order": _COUNT, "time_us": {"type": "number"}, "extent": _COUNT, "from_device": _STR,
                 "to_device": _STR, "bytes": _COUNT, "unit_heat": _NUM, "source_heat_before": _NUM,
                 "source_heat_after": _NUM, "target_heat_before": _NUM, "target_heat_after": _NUM})},
            "heat_unit": _STR,
            "io_shaping": _obj({
                "rule": _obj({"kind": {"enum": ["track-aligned"]}, "tracks": {"type": "integer", "minimum": 1},
                              "merge_gap_ms": {"type": "number", "minimum": 0}, "spec": _STR}),
                "devices": {"type": "array", "items": _obj({
                    "device": _STR, "bytes": _COUNT, "zones": {"type": "array", "items": _obj({
                        "first_offset_bytes": _COUNT, "track_bytes": {"type": "integer", "minimum": 1},
                        "tracks": _COUNT})}})}}),
            # create_area_bytes / copy_bytes: added without a version change, so optional.
            "alis": _obj({"window": _COUNT, "interval_s": {"type": "number", "minimum": 0}, "run_copies": _COUNT,
                          "heat_copies": _COUNT, "create_area_bytes": _COUNT, "copy_bytes": _COUNT, "addresses": _STR},
                         required=["window", "interval_s", "run_copies", "heat_copies", "addresses"]),
        }, required=[]),
        # Added without a version change, so optional (older plans have none).
        "cost_benefit": _obj({
            "move_model": _STR, "idle_model": _STR, "bytes_to_move": _COUNT, "n_moves": _COUNT,
            "move_s": {"type": "number", "minimum": 0}, "disk_busy_s": {"type": "number", "minimum": 0},
            "per_disk": {"type": "array", "items": _obj({
                "device": _STR, "bytes_read": _COUNT, "bytes_written": _COUNT, "volume_share_moved": _NUM,
                "move_s": _NUM, "idle_s": _NUM, "idle_share_used": _NUM})},
            "idle": {"type": "object"},
            "benefit": _obj({"mean_response": _NUM, "p95_response": _NUM, "hottest_utilization_before": _NUM,
                             "hottest_utilization_after": _NUM, "saved_response_s_per_window": _NUM,
                             "validation_demerit_ms": _NUM}),
            "gain_per_gib": _NUM, "net_s_per_window": _NUM,
            "budget": _obj({"max_volume_share": _NUM, "max_idle_share": _NUM, "min_gain_per_gib": _NUM}),
        }),
    }, required=["plan_id", "content_id", "schema_version", "created_at", "valid_until", "status", "reason", "target",
                 "inputs", "policy", "steps", "summary", "safety", "evidence", "detail"]),
}


class PlanDocumentError(ValueError):
    """A plan document that does not match PLAN_JSON_SCHEMA; the message names the place."""


_TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def schema_errors(value: Any, schema: Mapping[str, Any] | None = None, where: str = "plan",
                  root: Mapping[str, Any] | None = None) -> list[str]:
    """Every place where value breaks the schema (default PLAN_JSON_SCHEMA), as "place: problem"."""
    root = root if root is not None else (schema if schema is not None else PLAN_JSON_SCHEMA)
    schema = schema if schema is not None else PLAN_JSON_SCHEMA
    if "$ref" in schema:
        name = str(schema["$ref"]).removeprefix("#/$defs/")
        return schema_errors(value, root["$defs"][name], where, root)
    errors: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: {value!r} is not one of {schema['enum']}"]
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_TYPES[k](value) for k in kinds):
            return [f"{where}: {value!r} is not of type {' or '.join(kinds)}"]
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if _TYPES["number"](value) and "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{where}: {value!r} is less than the minimum {schema['minimum']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        errors += [f"{where}: missing {key!r}" for key in schema.get("required", []) if key not in value]
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                errors += schema_errors(item, props[key], f"{where}.{key}", root)
            elif extra is False:
                errors.append(f"{where}: unexpected {key!r}")
            elif isinstance(extra, Mapping):
                errors += schema_errors(item, extra, f"{where}.{key}", root)
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += schema_errors(item, schema["items"], f"{where}[{i}]", root)
    return errors


def validate_plan_document(doc: Any) -> None:
    """Raise PlanDocumentError naming every place the document breaks PLAN_JSON_SCHEMA (first 10)."""
    errors = schema_errors(doc)
    if errors:
        more = f" (and {len(errors) - 10} more)" if len(errors) > 10 else ""
        raise PlanDocumentError("; ".join(errors[:10]) + more)
