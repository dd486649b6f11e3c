"""Spark's Python worker daemon (`spark.python.daemon.module`), importing pyspark from its installed package
instead of the zip Spark puts first on the workers' PYTHONPATH.

Spark starts every executor's Python workers with `<SPARK_HOME>/python/lib/pyspark.zip`, the py4j source zip and
spark-core's jar first on PYTHONPATH. For a pip-installed pyspark that zip is a copy of the installed package
without compiled files, so each daemon compiles pyspark from source (~0.8 s), and, on Python 3.11, every worker it
forks spends 2.5-2.9 s in pyspark.worker's `importlib.invalidate_caches()`, which makes each of the ~16
zipimporters in the import cache (one per package directory inside the zips and the jar) read its archive's whole
directory again: about 3 s of a 6 s first Python stage of a small job (docs/BENCHMARKS.md, "Python workers").
Choice: only the installed package's own archives are dropped (its python/lib/*.zip and jars/*.jar, when the
rest of the path imports that package), so the code run is the same; any other layout (a Spark distribution's
SPARK_HOME) keeps them.

No import of pyspark or of libs' other modules before the path is cleaned: this runs before the daemon forks.
"""
from __future__ import annotations

import sys
from pathlib import Path


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


if __name__ == "__main__":
    drop_installed_archives()
    from pyspark import daemon

    daemon.manager()
