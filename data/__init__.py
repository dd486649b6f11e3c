"""The files blockheat ships with its package: the bundled real traces (data/traces) and DiskSim 4.0's HP C2247A
files (data/disksim). Only paths here; nothing is read on import."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent
#: One week of block I/O on HP's hplajw workstation (HP SRT), the trace `blockheat demo` ingests.
HPLAJW_TRACE = ROOT / "traces" / "hplajw" / "ajw.1week.srt"
#: The HP C2247A validation trace DiskSim 4.0 ships (disksim-validate format).
C2247A_VALIDATION_TRACE = ROOT / "traces" / "disksim-validation" / "hp_c2247a.trace"
#: DiskSim 4.0's HP C2247A parameter, disk-spec and model files.
DISKSIM_C2247A = ROOT / "disksim" / "hp_c2247a"


def path(relative: str) -> Path:
    """A shipped file by its path under data/; FileNotFoundError naming it when the package lacks it."""
    found = ROOT / relative
    if not found.is_file():
        raise FileNotFoundError(f"{found}: not shipped with this blockheat package")
    return found
