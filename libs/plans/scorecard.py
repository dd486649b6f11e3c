"""The policy scorecard's pure part: replay windows, the sweep's scenarios (one per distinct scenario of the
variants), and `policy_scores` rows ranked against the as-traced baseline. jobs/policy_scores.py runs the
scenarios through the Spark simulator stage.

    window = parse_window("0:21600", span_us=trace["span_us"])      # Window("0s-21600s", 0, 21_600_000_000)
    scenarios, scenario_of = sweep_scenarios(variants, target)
    rows = score_rows(variants, scenario_of, results, window=window, ...)   # ranked, improvements filled in

Ranking: lowest mean response first; saturated variants after every unsaturated one; ties by p95, then
policy_id. Improvement = 1 - policy / baseline for mean and p95 response; NULL when the baseline is
saturated (no finite ratio); -inf when only the policy is.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from blockheat.libs.plans.types import BASELINE, PolicyError, Target, Variant

__all__ = ["Window", "check_window", "parse_window", "rank_rows", "score_rows", "sweep_scenarios",
           "utilization_balance"]

ALL = "all"
_NUMBER = r"\d+(?:\.\d+)?"
_WINDOW_RE = re.compile(rf"^({_NUMBER}):({_NUMBER})?$")


@dataclass(frozen=True)
class Window:
    """The replayed requests: window_start_us <= ts_us < window_end_us (ts_us from the trace start)."""

    window_id: str
    start_us: int
    end_us: int

    def as_dict(self, requests: int) -> dict[str, Any]:
        return {"window_id": self.window_id, "start_us": self.start_us, "end_us": self.end_us, "requests": requests}


def _seconds(text: str) -> str:
    return f"{float(text):g}" if "." in text else str(int(text))


def parse_window(text: str | None, *, span_us: int) -> Window:
    """"all" (or None): the whole trace; "START:END" or "START:" in seconds from the trace start (END
    exclusive; open: the trace's end). The id is "all" or "<START>s-<END>s" as written (e.g. "0s-21600s")."""
    if text is None or text == ALL:
        return Window(ALL, 0, int(span_us) + 1)
    found = _WINDOW_RE.match(text.strip())
    if not found:
        raise PolicyError(f"window {text!r}: use 'all' or START:END in seconds from the trace start (e.g. 0:21600, "
                          f"or 86400: for the rest of the trace)")
    start_us = round(float(found.group(1)) * 1e6)
    end_us = round(float(found.group(2)) * 1e6) if found.group(2) else int(span_us) + 1
    if end_us <= start_us:
        raise PolicyError(f"window {text!r}: the end must be after the start")
    end_label = _seconds(found.group(2)) if found.group(2) else "end"
    return Window(f"{_seconds(found.group(1))}s-{end_label}{'s' if found.group(2) else ''}", start_us, end_us)


def check_window(text: str | None) -> None:
    """The form of a window (parse_window's errors) without the trace: an open end is taken as far off."""
    parse_window(text, span_us=1 << 62)


def sweep_scenarios(variants: Sequence[Variant],
                    target: Target) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, str]]:
    """(scenario_id, scenario) to simulate, one per distinct scenario (its id: the first variant's
    policy_id), and policy_id -> scenario_id for every variant."""
    base = target.base_scenario()
    scenarios: list[tuple[str, dict[str, Any]]] = []
    by_text: dict[str, str] = {}
    scenario_of: dict[str, str] = {}
    for v in variants:
        if v.policy_id in scenario_of:
            raise PolicyError(f"policy id {v.policy_id!r} occurs twice in the sweep")
        scenario = {**base, **v.scenario}
        text = json.dumps(scenario, sort_keys=True)
        if text not in by_text:
            by_text[text] = v.policy_id
            scenarios.append((v.policy_id, scenario))
        scenario_of[v.policy_id] = by_text[text]
    return scenarios, scenario_of


def utilization_balance(utilization: Sequence[float] | None) -> float | None:
    """Hottest disk's utilization over the mean (1 = even; None without load)."""
    if not utilization:
        return None
    mean = sum(utilization) / len(utilization)
    return max(utilization) / mean if mean > 0 else None


def _improvement(policy: float, baseline: float) -> float | None:
    if math.isinf(baseline):
        return None
    if math.isinf(policy):
        return -math.inf
    return 1.0 - policy / baseline if baseline > 0 else None


def rank_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows sorted best first with `rank` set (1 = best)."""
    ordered = sorted(rows, key=lambda r: (bool(r["saturated"]), r["mean_response_ms"], r["p95_response_ms"],
                                          r["policy_id"]))
    return [{**r, "rank": i} for i, r in enumerate(ordered, start=1)]


def score_rows(variants: Sequence[Variant], scenario_of: Mapping[str, str],
               results: Mapping[str, Mapping[str, Any]], *, target: Target, window: Window, window_requests: int,
               grid_id: str, array_group: str) -> list[dict[str, Any]]:
    """policy_scores rows (schemas.policy_scores.COLUMNS) from the sim_results rows by scenario_id."""
    baseline_id = scenario_of.get(BASELINE)
    if baseline_id is None or baseline_id not in results:
        raise PolicyError(f"the sweep of trace {target.trace_id!r} window {window.window_id} has no as-traced "
                          "baseline result")
    base = results[baseline_id]
    rows = []
    for v in variants:
        sid = scenario_of[v.policy_id]
        r = results[sid]
        note = v.note
        if sid != v.policy_id:
            note = "; ".join(x for x in (note, f"same scenario as {sid}") if x)
        rows.append({
            "trace_id": target.trace_id, "window_id": window.window_id, "policy_id": v.policy_id, "family": v.family,
            "rank": 0, "params_json": v.params_json, "window_start_us": window.start_us,
            "window_end_us": window.end_us, "window_requests": window_requests, "array_group": array_group,
            "n_disks": target.n_disks, "spec": str(r["spec"]), "scheduler": target.scheduler,
            "speedup": float(target.speedup), "grid_id": grid_id, "scenario_id": sid,
            "saturated": bool(r["saturated"]), "mean_response_ms": float(r["mean_response_ms"]),
            "p95_response_ms": float(r["p95_response_ms"]), "p99_response_ms": float(r["p99_response_ms"]),
            "mean_service_ms": r["mean_service_ms"], "mean_queue_ms": r["mean_queue_ms"],
            "hottest_utilization": r["hottest_utilization"],
            "utilization_max_over_mean": utilization_balance(r["disk_utilization"]),
            "migration_mb": float(r["migration_mb"]), "remaps": int(r["remaps"]),
            "baseline_mean_response_ms": float(base["mean_response_ms"]),
            "baseline_p95_response_ms": float(base["p95_response_ms"]),
            "improvement_mean": _improvement(float(r["mean_response_ms"]), float(base["mean_response_ms"])),
            "improvement_p95": _improvement(float(r["p95_response_ms"]), float(base["p95_response_ms"])),
            "plannable": v.plannable, "note": note,
        })
    return rank_rows(rows)
