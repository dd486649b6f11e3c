"""The nightly's Spark stages as dags/nightly_trace_analysis.py orders them, as plain data (no Airflow import), so
the DAG wires its tasks from it and bench/scale.py runs the stages the same way.

- UPSTREAM: each stage's upstream stages (ingest_trace's downstream stages wait for the ingest to be recorded).
- PRIORITY: which ready stage starts first when the run's task slots are full (Airflow's priority_weight, absolute):
  the longest chains first, so that with more than one slot a long stage started last does not hold the run's end
  (list scheduling, longest first; on the 100 M-request scale trace the scorecard is over a third of the stages'
  time and the ALIS graph and layout nearly a quarter).
- MAX_ACTIVE_TASKS: tasks of one run at once. One: every stage uses all the cores it is given (local mode's, or
  the cluster's executors), so a second stage beside it only competes for them; the 100 M-request scale trace's
  stages took 739.6 s two at a time against 683.9 s one after another on 2 cores (bench/scale.py --slots 2).
"""
from __future__ import annotations

UPSTREAM: dict[str, tuple[str, ...]] = {
    "ingest_trace": (),
    "extent_heat": ("ingest_trace",),
    "heat_tracking": ("ingest_trace",),
    "trace_profile": ("ingest_trace",),
    "heat_report": ("extent_heat", "heat_tracking", "trace_profile"),
    "aged_heat": ("ingest_trace",),
    "alis_graph": ("ingest_trace",),
    "alis_layout": ("alis_graph",),
    "policy_scores": ("ingest_trace",),
    "reorg_plan": ("policy_scores",),
}

#: Most urgent first.
_BY_PRIORITY = ("ingest_trace", "policy_scores", "reorg_plan", "alis_graph", "alis_layout", "trace_profile",
                "heat_tracking", "extent_heat", "heat_report", "aged_heat")
PRIORITY: dict[str, int] = {s: len(_BY_PRIORITY) - i for i, s in enumerate(_BY_PRIORITY)}

MAX_ACTIVE_TASKS = 1


def next_stages(finished: set[str] | frozenset[str], started: set[str] | frozenset[str],
                stages: tuple[str, ...] | None = None) -> list[str]:
    """The stages (of `stages`, default all) not yet started whose upstream stages within `stages` have all
    finished, most urgent first: what takes a free task slot next, one slot each."""
    chosen = tuple(UPSTREAM) if stages is None else stages
    ready = [s for s in chosen if s not in started and all(u in finished for u in UPSTREAM[s] if u in chosen)]
    return sorted(ready, key=lambda s: -PRIORITY[s])
