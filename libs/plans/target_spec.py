"""The disk spec a policy target runs on: the scenarios' "spec" value (a spec name or file, or the trace's
recorded geometry) and the DiskSpec it builds, as the simulator builds it."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from blockheat.libs.plans.types import PolicyError
from blockheat.sim import ScenarioConfig
from blockheat.sim import spec_from_geometry as from_geometry

if TYPE_CHECKING:
    from blockheat.sim import DiskSpec


def spec_param(info: Mapping[str, Any], devices: Sequence[str], spec: str | None) -> Any:
    """The scenarios' "spec": the given name or file, or {"geometry": ...} from the trace's recorded geometry
    (every device must have one, describing the same drive)."""
    if spec is not None:
        return spec
    geometry = {str(g["device"]): g for g in info.get("geometry") or ()}
    missing = [d for d in devices if d not in geometry]
    if missing:
        raise PolicyError(f"trace {info['trace_id']!r} records no disk geometry for device(s) {missing}: name a "
                          f"disk spec (--spec hp_c2247a, or a spec file)")
    built = {d: from_geometry(geometry[d]) for d in devices}
    first = built[devices[0]]
    differ = [d for d in devices if (built[d].capacity_sectors, built[d].cylinders, built[d].rpm)
              != (first.capacity_sectors, first.cylinders, first.rpm)]
    if differ:
        raise PolicyError(f"trace {info['trace_id']!r}: devices {[devices[0], *differ]} record different drives; "
                          "one array has one disk model: name a spec")
    return {"geometry": geometry[devices[0]]}


def resolve_spec(param: Any) -> DiskSpec:
    """The DiskSpec a scenario's "spec" value builds (sim.scenarios.ScenarioConfig's resolution)."""
    return ScenarioConfig.from_dict({"scenario_id": "spec", "spec": param}).spec
