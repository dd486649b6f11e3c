"""A cold child process for the start-up benchmarks (bench/jvm_start.py, bench/python_workers.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def cold_run(code: str, *args: str) -> dict[str, float]:
    """`python -c code args` from the repository root, Spark's Python workers on this interpreter; the child
    prints one line "RESULT <json of seconds>", which is returned."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=600, check=True)
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])
