"""blockheat's simulator core: disk and disk-array models, trace replay and results (numpy + numba, never
pyspark). See sim/README.md.

The package's public face: the names the other layers use, listed in __all__ and imported from here
(`from blockheat.sim import DiskSpec, Simulation`), never from sim's modules. Each name is loaded with its module
on first use (module __getattr__), so importing one name costs only its module, not numba's whole simulator.
Importing the package first drops numba's cached loops if any of sim's sources changed since they were compiled
(sim.jit_cache: a hash of the sources, about 3 ms).
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from blockheat.sim.jit_cache import drop_stale

drop_stale(Path(__file__).parent, [Path(__file__).parent])

#: Public name -> (module under blockheat.sim, its name there).
_EXPORTS: dict[str, tuple[str, str]] = {
    # disk specs
    "CacheSpec": ("spec", "CacheSpec"), "DiskSpec": ("spec", "DiskSpec"), "Overheads": ("spec", "Overheads"),
    "SeekCurve": ("spec", "SeekCurve"), "SpecError": ("spec", "SpecError"),
    "SHIPPED_SPECS": ("specs", "SHIPPED"), "load_spec": ("specs", "load"), "resolve_spec": ("specs", "resolve"),
    "spec_from_geometry": ("specs", "from_geometry"), "spec_from_srt_header": ("specs", "from_srt_header"),
    # arrays, requests, the engine and its results
    "AsTraced": ("array", "AsTraced"), "Concatenated": ("array", "Concatenated"), "DiskArray": ("array", "DiskArray"),
    "Extent": ("array", "Extent"), "ExtentMap": ("array", "ExtentMap"), "ExtentTable": ("array", "ExtentTable"),
    "Layout": ("array", "Layout"),
    "LayoutArrays": ("array", "LayoutArrays"), "RandomDisk": ("array", "RandomDisk"), "Striped": ("array", "Striped"),
    "Requests": ("records", "Requests"), "StreamFacts": ("records", "StreamFacts"),
    "SpilledRequests": ("spill", "SpilledRequests"), "SPILL_CHUNK_REQUESTS": ("spill", "CHUNK_REQUESTS"),
    "ClosedLoop": ("engine", "ClosedLoop"), "SimConfig": ("engine", "SimConfig"),
    "Simulation": ("engine", "Simulation"), "Window": ("engine", "Window"),
    "run_with_policy": ("engine", "run_with_policy"),
    "per_request": ("stats", "per_request"), "timeseries": ("stats", "timeseries"),
    "select_bits": ("select", "select_bits"),
    "kth_smallest": ("select", "kth_smallest"), "float_of_bits": ("select", "float_of_bits"),
    "top16_counts": ("select", "top16_counts"),
    # workloads
    "FiveWorkload": ("workloads", "FiveWorkload"), "five_synthetic": ("workloads", "five_synthetic"),
    "www_synthetic": ("workloads", "www_synthetic"),
    "requests_from_arrow": ("workloads", "from_arrow"),
    "requests_from_arrow_tables": ("workloads", "from_arrow_tables"),
    "requests_from_coded_table": ("workloads", "from_coded_table"),
    "requests_from_parquet_files": ("workloads", "from_parquet_files"),
    "mix_requests": ("workloads", "mix"), "poisson_background": ("workloads", "poisson_background"),
    # policies: FIVE's allocation and cooling, track alignment
    "AllocUnit": ("allocation", "AllocUnit"), "round_robin_allocation": ("allocation", "round_robin_allocation"),
    "to_extent_map": ("allocation", "to_extent_map"),
    "CoolingConfig": ("cooling", "CoolingConfig"), "moves_table": ("cooling", "moves_table"),
    "DiskCooling": ("cooling", "DiskCooling"), "InterarrivalTracker": ("tracker", "InterarrivalTracker"),
    "align_to_tracks": ("tracks", "align_to_tracks"), "fixed_size_io": ("tracks", "fixed_size_io"),
    "track_map": ("tracks", "track_map"),
    # scenarios (a grid entry replayed over a partition of `requests`)
    "AlisPolicy": ("scenarios", "AlisPolicy"), "CoolingPolicy": ("scenarios", "CoolingPolicy"),
    "GreedyAllocation": ("scenarios", "GreedyAllocation"), "RoundRobinExtents": ("scenarios", "RoundRobinExtents"),
    "AsTracedExtents": ("scenarios", "AsTracedExtents"),
    "ScenarioConfig": ("scenarios", "ScenarioConfig"), "partition_layout": ("scenarios", "partition_layout"),
    "simulate_requests": ("scenarios", "simulate_requests"), "simulate_scenario": ("scenarios", "simulate_scenario"),
    "simulate_chunks": ("scenarios", "simulate_chunks"), "scenario_streams": ("scenarios", "streams"),
    # ALIS
    "AlisParams": ("alis.params", "AlisParams"), "DAY_US": ("alis.params", "DAY_US"),
    "ALIS_EDGE_BYTES": ("alis.graph", "EDGE_BYTES"), "ALIS_VERTEX_BYTES": ("alis.graph", "VERTEX_BYTES"),
    "ALIS_PRUNE_SHARE": ("alis.graph", "PRUNE_SHARE"),
    "alis_heaviest_into": ("alis.graph", "heaviest_into"), "alis_vertex_count": ("alis.graph", "vertex_count"),
    "check_alis_context": ("alis.graph", "check_context"),
    "count_pairs": ("alis.graph", "count_pairs"), "prune_arrays": ("alis.graph", "prune_arrays"),
    "pruned_edges": ("alis.graph", "pruned_edges"),
    "sum_pairs": ("alis.graph", "sum_pairs"), "merge_counts": ("alis.graph", "merge_counts"),
    "ALIS_THRESHOLD": ("alis.runs", "THRESHOLD"), "ALIS_THRESHOLD_COMBINED": ("alis.runs", "THRESHOLD_COMBINED"),
    "ALIS_REL_TOLERANCE": ("alis.runs", "REL_TOLERANCE"), "discover_run_arrays": ("alis.runs", "discover_run_arrays"),
    "discover_runs": ("alis.runs", "discover_runs"),
    "ExtentSet": ("alis.units", "ExtentSet"), "KeyTable": ("alis.units", "KeyTable"),
    "distinct_extents": ("alis.units", "distinct_extents"),
    "extent_packing": ("alis.units", "packing"), "packed_extents": ("alis.units", "packed"),
    "ALIS_LAYOUTS": ("alis.layout", "LAYOUTS"), "ALIS_MODES": ("alis.layout", "MODES"),
    "check_alis_plan": ("alis.layout", "check_plan"), "plan_area": ("alis.layout", "plan_area"),
    "WindowPlan": ("alis.plan", "WindowPlan"), "plan_schedule": ("alis.plan", "plan_schedule"),
    "plan_trace_window": ("alis.plan", "plan_trace_window"), "volumes_for": ("alis.plan", "volumes_for"),
    "AlisSetup": ("alis.policy", "AlisSetup"), "prepare_alis": ("alis.policy", "prepare"),
    "run_alis_measured": ("alis.policy", "run_measured"),
    "REGION_RUN": ("redirect", "REGION_RUN"), "Reorganization": ("redirect", "Reorganization"),
    # drive validation
    "ValidationTraceError": ("validate", "ValidationTraceError"), "demerit_ms": ("validate", "demerit_ms"),
    "plot_cdfs": ("validate", "plot_cdfs"), "read_validation_trace": ("validate", "read_validation_trace"),
    "validate_closed_loop": ("validate", "validate_closed_loop"), "validate_srt": ("validate", "validate_srt"),
    "closed_loop_simulation": ("validate", "closed_loop_simulation"),
    "disksim_demerit_ms": ("validate", "disksim_demerit_ms"),
    # compiled loops' cache hints
    "prefetch_read": ("prefetch", "prefetch_read"), "prefetch_write": ("prefetch", "prefetch_write"),
    # numba's cache
    "JIT_SIM_DIR": ("jit_cache", "SIM_DIR"), "drop_stale_jit_cache": ("jit_cache", "drop_stale"),
    "compile_alis": ("warm", "compile_alis"), "compile_all": ("warm", "compile_all"),
    "frozen_array": ("warm", "frozen"), "warm_trace": ("warm", "trace"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """A public name, loaded with its module on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = _EXPORTS[name]
    value = getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
