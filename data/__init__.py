"""The files blockheat ships with its package: the bundled real traces (data/traces) and DiskSim 4.0's HP C2247A
files (data/disksim). Only paths here; nothing is read on import."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent
#: One week of block I/O on HP's hplajw workstation (HP SRT), the trace `blockheat demo` ingests.
HPLAJW_TRACE = ROOT / "traces" / "hplajw" / "ajw.1week.srt"
