"""blockheat's simulator core: disk and disk-array models, trace replay and results (numpy + numba,
never pyspark). See sim/README.md."""
from __future__ import annotations
