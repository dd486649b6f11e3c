"""Spark's Python worker daemon (`spark.python.daemon.module`), importing pyspark from its installed package
instead of the zip Spark puts first on the workers' PYTHONPATH.

Spark starts every executor's Python workers with `<SPARK_HOME>/python/lib/pyspark.zip`, the py4j source zip and
spark-core's jar first on PYTHONPATH. For a pip-installed pyspark that zip is a copy of the installed package
without compiled files, so each daemon compiles pyspark from source, and, on Python 3.11, every worker it forks
runs pyspark.worker's `importlib.invalidate_caches()`, which makes each of the zipimporters in the import cache
(one per package directory inside the zips and the jar) read its archive's whole directory again: a large part of
a small job's first Python stage (docs/BENCHMARKS.md, "Python workers").
Choice: only the installed package's own archives are dropped (its python/lib/*.zip and jars/*.jar, when the
rest of the path imports that package), so the code run is the same; any other layout (a Spark distribution's
SPARK_HOME) keeps them.

Then the daemon imports what the workers' functions import (WORKER_MODULES: Arrow, numba and blockheat's task
modules) before it forks: a forked worker inherits them instead of importing them itself, and Spark forks a new
one whenever a worker was idle for a minute (docs/BENCHMARKS.md, "Python workers").

No import of pyspark or of libs' other modules before the path is cleaned.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import sys
from pathlib import Path

#: Imported by the daemon before it forks its workers; BLOCKHEAT_WORKER_MODULES (comma-separated, "" for none)
#: replaces the list. The modules whose functions run in tasks (device passes, mapInArrow, applyInArrow), and what
#: they import.
WORKER_MODULES = ("pyarrow", "numba", "blockheat.libs.ingest.pipeline", "blockheat.libs.ingest.direct",
                  "blockheat.libs.table_io.device_pass", "blockheat.libs.io.task_parquet",
                  "blockheat.libs.transforms.profile", "blockheat.libs.table_io.heat",
                  "blockheat.libs.table_io.tracking",
                  "blockheat.libs.alis.graph", "blockheat.libs.alis.runs", "blockheat.libs.table_io.alis_graph")


def installed_archives(path: list[str]) -> list[str]:
    """The entries of `path` that are archives of the pyspark package found on the rest of `path`: its
    python/lib/*.zip copies of pyspark and py4j, and its jars/*.jar (spark-core's, which holds no Python)."""
    archives = [p for p in path if p.endswith((".zip", ".jar"))]
    for entry in (p for p in path if p not in archives):
        package = (Path(entry or ".") / "pyspark").resolve()
        if (package / "__init__.py").is_file():
            return [a for a in archives if Path(a).resolve().parent in (package / "python" / "lib", package / "jars")]
    return []


def drop_installed_archives() -> list[str]:
    """Remove those archives from sys.path and their importers from the import cache; returns what was removed."""
    archives = installed_archives(sys.path)
    for a in archives:
        sys.path.remove(a)
    for key in [k for k in sys.path_importer_cache if any(k == a or k.startswith(a + "/") for a in archives)]:
        del sys.path_importer_cache[key]
    return archives


def worker_modules() -> list[str]:
    """WORKER_MODULES, or the list BLOCKHEAT_WORKER_MODULES names."""
    listed = os.environ.get("BLOCKHEAT_WORKER_MODULES")
    return list(WORKER_MODULES) if listed is None else [m.strip() for m in listed.split(",") if m.strip()]


def preimport(modules: list[str]) -> list[str]:
    """Import `modules`; returns those imported. One that fails to import here (say, not installed on this
    executor) is left to the worker that needs it, whose task then fails with the import's own error. What the
    imports print goes to standard error: the daemon's standard output carries its port to the JVM (numba's
    NUMBA_DEBUG_CACHE lines there stopped every Python task)."""
    imported = []
    with contextlib.redirect_stdout(sys.stderr):
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception:  # the daemon must start; the task that needs the module reports the error
                continue
            imported.append(name)
    return imported


if __name__ == "__main__":
    drop_installed_archives()
    preimport(worker_modules())
    from pyspark import daemon  # only once the path is cleaned: the point of this module

    daemon.manager()
