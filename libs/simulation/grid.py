"""Scenario grids for `blockheat simulate`: the grid file (JSON), its validation, and its expansion into
partitions (trace x array group x scenario), each with a checked sim.scenarios.ScenarioConfig.

Pure logic, no Spark: libs/simulation/stage.py passes the traces' catalog rows (devices, geometry) in. The format
is documented in sim/README.md ("Scenario grids").

    grid = load_grid("grids/alpha.json")           # GridError names the file and the key
    parts = plan_parts(grid, {"hplajw": trace_info(spark, warehouse, "hplajw")})
"""
from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from blockheat.sim import SHIPPED_SPECS as SHIPPED
from blockheat.sim import DiskArray, ScenarioConfig, SpecError
from blockheat.sim import spec_from_geometry as from_geometry

#: `"spec": "from-trace"`: each array group's disks are built from the trace's recorded geometry
#: (traces.geometry, the HP SRT header) by sim.specs.from_geometry.
FROM_TRACE = "from-trace"
ALL_DEVICES = "all"
PER_DEVICE = "per-device"
GRID_KEYS = ("grid_id", "description", "traces", "array_groups", "base", "scenarios", "sweep")
GRID_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")   # a partition value and SQL literal
BAD_ID_CHARS = re.compile(r"['\"\\\x00-\x1f]")
# Checks every scenario key but `spec` before the trace's geometry is known (any valid spec would do).
_STAND_IN_SPEC = "hp_335h"


class GridError(ValueError):
    """A malformed grid file; the message names the file and the key."""


@dataclass(frozen=True)
class TraceSelection:
    """A trace of the grid and how its devices form arrays: "all" (one array of every traced device),
    "per-device" (one array per device) or explicit device lists (each one array, disks in that order)."""

    trace_id: str
    array_groups: str | tuple[tuple[str, ...], ...] = ALL_DEVICES


@dataclass(frozen=True)
class Scenario:
    """One expanded scenario: sim.scenarios keys without scenario_id (`spec` may be FROM_TRACE)."""

    scenario_id: str
    params: Mapping[str, Any]
    layout_label: str


@dataclass(frozen=True)
class Grid:
    grid_id: str
    source: str                            # the file, for messages
    traces: tuple[TraceSelection, ...]
    scenarios: tuple[Scenario, ...]


@dataclass(frozen=True)
class Part:
    """One Spark partition: one scenario over the requests of one array group of one trace."""

    trace_id: str
    array_group: str                       # "all", a device name, or device names joined by "+"
    devices: tuple[str, ...]
    scenario_id: str
    config: ScenarioConfig
    layout: str
    scenario_json: str                     # the expanded scenario, stored in sim_results

    @property
    def key(self) -> tuple[str, str, str]:
        return self.trace_id, self.array_group, self.scenario_id


def load_grid(path: str | Path) -> Grid:
    """Read and check a grid file (JSON). Relative spec paths are relative to the file."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise GridError(f"grid file {path}: cannot read ({exc.strerror})") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GridError(f"{path}: not valid JSON: {exc}") from exc
    return parse_grid(data, source=str(path), default_id=path.stem, base_dir=path.parent)


def parse_grid(data: Any, *, source: str, default_id: str | None = None, base_dir: Path | None = None) -> Grid:
    """Check a grid (the parsed file) and expand base x scenarios x sweep into scenarios."""
    where = _Where(source)
    if not isinstance(data, Mapping):
        raise where.error("", f"the grid must be a JSON object, got {type(data).__name__}")
    extra = sorted(set(data) - set(GRID_KEYS))
    if extra:
        raise where.error("", f"unknown key(s) {extra}; allowed: {list(GRID_KEYS)}")
    grid_id = data.get("grid_id", default_id)
    if not isinstance(grid_id, str) or not GRID_ID_RE.match(grid_id):
        raise where.error("grid_id", f"{grid_id!r} must be 1-128 letters, digits and _ . : - (starting with a "
                                     "letter or digit)")
    traces = _traces(where, data.get("traces"), data.get("array_groups", ALL_DEVICES))
    base = data.get("base", {})
    if not isinstance(base, Mapping):
        raise where.error("base", f"must be an object of scenario keys, got {base!r}")
    if "scenario_id" in base:
        raise where.error("base.scenario_id", "scenario ids belong in 'scenarios' (base is shared by all)")
    base = _relative_spec(dict(base), base_dir)
    explicit = _explicit_scenarios(where, data.get("scenarios"), base_dir)
    grid_axes = _sweep(where, "sweep", data.get("sweep", {}), base_dir)
    scenarios: list[Scenario] = []
    for i, (sid, own) in enumerate(explicit):
        # A scenario's own sweep multiplies with the grid's.
        axes = grid_axes + _sweep(where, f"scenarios[{i}].sweep", own.pop("sweep", {}), base_dir)
        swept = [key for key, _ in axes]
        clash = sorted(set(own) & set(swept)) or sorted({k for k in swept if swept.count(k) > 1})
        if clash:
            raise where.error(f"scenarios[{i}]", f"sets {clash}, which a sweep also varies")
        for combo in itertools.product(*[[(key, label, value) for label, value in values] for key, values in axes]):
            labels = [f"{key}={label}" for key, label, _ in combo]
            scenario_id = ",".join(([sid] if sid else []) + labels) or "base"
            params = {**base, **own, **{key: value for key, _, value in combo}}
            layout_label = next((label for key, label, _ in combo if key == "layout"), None)
            scenarios.append(Scenario(scenario_id, params,
                                      layout_label or describe_layout(params.get("layout"))))
    seen: set[str] = set()
    for s in scenarios:
        if s.scenario_id in seen:
            raise where.error("scenarios", f"scenario id {s.scenario_id!r} occurs twice")
        seen.add(s.scenario_id)
        _check_scenario(where, s)
    return Grid(grid_id, source, traces, tuple(scenarios))


def plan_parts(grid: Grid, catalog: Mapping[str, Mapping[str, Any]]) -> list[Part]:
    """Every (trace, array group, scenario) of the grid with its ScenarioConfig, from the traces' catalog
    rows (`devices`, `geometry`). Raises GridError for groups naming unknown devices, FROM_TRACE without a
    geometry, and scenarios that do not fit the group (e.g. a stripe wider than the array)."""
    where = _Where(grid.source)
    parts = []
    for i, selection in enumerate(grid.traces):
        info = catalog[selection.trace_id]
        geometry = {str(g["device"]): g for g in info.get("geometry") or ()}
        for group, devices in _groups(where, f"traces[{i}]", selection, [str(d) for d in info["devices"]]):
            spec_geometry = None
            for scenario in grid.scenarios:
                params = dict(scenario.params)
                label = f"scenario {scenario.scenario_id!r} on trace {selection.trace_id!r}, array group {group!r}"
                if params.get("spec") == FROM_TRACE:
                    spec_geometry = spec_geometry or _group_geometry(where, label, geometry, devices)
                    params["spec"] = {"geometry": spec_geometry}
                given = params.get("devices")
                if given is not None and not set(devices) <= {str(d) for d in given}:
                    raise where.error(label, f"'devices' {list(given)} must include the group's devices "
                                             f"{list(devices)}")
                params.setdefault("devices", list(devices))
                try:
                    config = ScenarioConfig.from_dict({"scenario_id": scenario.scenario_id, **params})
                    DiskArray(config.n_disks or len(config.devices or devices), config.layout, config.scheduler)
                except (ValueError, TypeError) as exc:
                    raise where.error(label, str(exc)) from exc
                scenario_json = json.dumps({"scenario_id": scenario.scenario_id, **scenario.params},
                                           sort_keys=True, default=str)
                parts.append(Part(selection.trace_id, group, devices, scenario.scenario_id, config,
                                  scenario.layout_label, scenario_json))
    return parts


def describe_layout(layout: Any) -> str:
    """A short label: kind, then scalar parameters (`striped(unit_sectors=128)`); extents by count."""
    if not isinstance(layout, Mapping):
        return "as_traced"
    kind = str(layout.get("kind", "?"))
    if kind == "extents" and "extents" in layout:
        return f"extents({len(layout['extents'])})"
    scalars = [f"{k}={v}" for k, v in layout.items() if k != "kind" and isinstance(v, str | int | float)]
    return f"{kind}({','.join(scalars)})" if scalars else kind


class _Where:
    def __init__(self, source: str) -> None:
        self.source = source

    def error(self, key: str, message: str) -> GridError:
        return GridError(f"{self.source}: {key}: {message}" if key else f"{self.source}: {message}")


def _traces(where: _Where, raw: Any, default_groups: Any) -> tuple[TraceSelection, ...]:
    if not isinstance(raw, list) or not raw:
        raise where.error("traces", f"must be a non-empty list of trace ids (or {{trace_id, array_groups}} "
                                    f"objects), got {raw!r}")
    default = _array_groups(where, "array_groups", default_groups)
    out = []
    for i, item in enumerate(raw):
        if isinstance(item, str):
            out.append(TraceSelection(item, default))
            continue
        if not isinstance(item, Mapping) or not isinstance(item.get("trace_id"), str) \
                or set(item) - {"trace_id", "array_groups"}:
            raise where.error(f"traces[{i}]", f"must be a trace id or {{trace_id, array_groups}}, got {item!r}")
        groups = item.get("array_groups")
        out.append(TraceSelection(item["trace_id"], default if groups is None
                                  else _array_groups(where, f"traces[{i}].array_groups", groups)))
    ids = [t.trace_id for t in out]
    if len(set(ids)) != len(ids):
        raise where.error("traces", f"a trace is listed twice: {ids}")
    return tuple(out)


def _array_groups(where: _Where, key: str, raw: Any) -> str | tuple[tuple[str, ...], ...]:
    if raw in (ALL_DEVICES, PER_DEVICE):
        return str(raw)
    if isinstance(raw, list) and raw and all(isinstance(g, list) and g and all(isinstance(d, str) for d in g)
                                             for g in raw):
        flat = [d for g in raw for d in g]
        if len(set(flat)) != len(flat):
            raise where.error(key, f"a device is in two groups: {raw}")
        return tuple(tuple(g) for g in raw)
    raise where.error(key, f"must be {ALL_DEVICES!r}, {PER_DEVICE!r} or a list of device-name lists "
                           f"(e.g. [[\"0\", \"1\"], [\"2\"]]), got {raw!r}")


def _groups(where: _Where, key: str, selection: TraceSelection,
            traced: list[str]) -> list[tuple[str, tuple[str, ...]]]:
    if selection.array_groups == ALL_DEVICES:
        return [(ALL_DEVICES, tuple(traced))]
    if selection.array_groups == PER_DEVICE:
        return [(d, (d,)) for d in traced]
    out = []
    for group in selection.array_groups:
        unknown = [d for d in group if d not in traced]
        if unknown:
            raise where.error(f"{key}.array_groups", f"device(s) {unknown} are not in trace "
                                                     f"{selection.trace_id!r} (devices: {traced})")
        out.append(("+".join(group), tuple(group)))
    return out


def _group_geometry(where: _Where, label: str, geometry: Mapping[str, Mapping[str, Any]],
                    devices: Sequence[str]) -> Mapping[str, Any]:
    """The geometry entry the group's disks are built from; every device of the group must describe the same
    drive, since an array has one disk model."""
    missing = [d for d in devices if d not in geometry]
    if missing:
        raise where.error(label, f"spec {FROM_TRACE!r} needs the trace's recorded geometry, but there is none "
                                 f"for device(s) {missing} (only HP SRT headers carry it); name a spec instead")
    try:
        specs = {d: from_geometry(geometry[d]) for d in devices}
    except SpecError as exc:
        raise where.error(label, str(exc)) from exc
    first = devices[0]
    differ = [d for d in devices if _unnamed(specs[d]) != _unnamed(specs[first])]
    if differ:
        raise where.error(label, f"devices {[first, *differ]} have different geometries and one array has one disk "
                                 f"model: use array_groups {PER_DEVICE!r} or name a spec")
    return geometry[first]


def _unnamed(spec: Any) -> Any:

    return replace(spec, name="")


def _explicit_scenarios(where: _Where, raw: Any, base_dir: Path | None) -> list[tuple[str, dict[str, Any]]]:
    if raw is None:
        return [("", {})]
    if not isinstance(raw, list) or not raw:
        raise where.error("scenarios", f"must be a non-empty list of objects with a scenario_id, got {raw!r}")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise where.error(f"scenarios[{i}]", f"must be an object, got {item!r}")
        sid = item.get("scenario_id")
        if not isinstance(sid, str) or not sid or BAD_ID_CHARS.search(sid) or len(sid) > 200:
            raise where.error(f"scenarios[{i}].scenario_id",
                              f"must be a non-empty string without quotes or backslashes, got {sid!r}")
        out.append((sid, _relative_spec({k: v for k, v in item.items() if k != "scenario_id"}, base_dir)))
    return out


def _sweep(where: _Where, name: str, raw: Any, base_dir: Path | None) -> list[tuple[str, list[tuple[str, Any]]]]:
    if not isinstance(raw, Mapping):
        raise where.error(name, f"must be an object {{scenario key: [values] | {{label: value}}}}, got {raw!r}")
    axes = []
    for key, values in raw.items():
        if key in ("scenario_id", "sweep"):
            raise where.error(f"{name}.{key}", "cannot be swept")
        if isinstance(values, Mapping) and values:
            labelled = [(str(label), value) for label, value in values.items()]
        elif isinstance(values, list) and values:
            labelled = [(_label(where, f"{name}.{key}[{i}]", v), v) for i, v in enumerate(values)]
        else:
            raise where.error(f"{name}.{key}", f"must be a non-empty list of values or an object {{label: value}}, "
                                               f"got {values!r}")
        labels = [label for label, _ in labelled]
        if len(set(labels)) != len(labels):
            raise where.error(f"{name}.{key}", f"labels {labels} repeat; write the axis as {{label: value, ...}}")
        bad = [label for label in labels if BAD_ID_CHARS.search(label)]
        if bad:
            raise where.error(f"{name}.{key}", f"labels {bad} contain quotes or backslashes")
        if key == "spec":
            labelled = [(label, _spec_path(v, base_dir)) for label, v in labelled]
        axes.append((str(key), labelled))
    return axes


def _label(where: _Where, key: str, value: Any) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return str(value).lower() if isinstance(value, bool) or value is None else str(value)
    if isinstance(value, float):
        return f"{value:g}" if math.isfinite(value) else str(value)
    if isinstance(value, Mapping) and isinstance(value.get("name") or value.get("kind"), str):
        return str(value.get("name") or value.get("kind"))
    raise where.error(key, f"{value!r} has no label: write the axis as {{label: value, ...}}")


def _spec_path(spec: Any, base_dir: Path | None) -> Any:
    """A relative spec file path that exists next to the grid file, as that file's path (shipped names,
    FROM_TRACE and anything else stay as written: the spec resolver reports them)."""
    if not isinstance(spec, str) or spec in SHIPPED or spec == FROM_TRACE or base_dir is None:
        return spec
    path = base_dir / spec
    return str(path) if not Path(spec).is_absolute() and path.is_file() else spec


def _relative_spec(params: dict[str, Any], base_dir: Path | None) -> dict[str, Any]:
    if "spec" in params:
        params["spec"] = _spec_path(params["spec"], base_dir)
    return params


def _check_scenario(where: _Where, scenario: Scenario) -> None:
    """Every key and value of the scenario, before Spark starts (FROM_TRACE: all but the spec itself)."""
    params = dict(scenario.params)
    if params.get("spec") == FROM_TRACE:
        params["spec"] = _STAND_IN_SPEC
    try:
        ScenarioConfig.from_dict({"scenario_id": scenario.scenario_id, **params})
    except (ValueError, TypeError) as exc:
        raise where.error(f"scenario {scenario.scenario_id!r}", str(exc)) from exc
