"""The Python workers' daemon (libs.spark_daemon): the archives it drops from the workers' path, and a real
worker of the session importing pyspark from the installed package."""
from __future__ import annotations

from pathlib import Path

import pyspark

from libs.spark_daemon import installed_archives


def _package(root: Path) -> Path:
    """A pip-like install under root/site: pyspark with its zips and a jar."""
    pkg = root / "site" / "pyspark"
    (pkg / "python" / "lib").mkdir(parents=True)
    (pkg / "jars").mkdir()
    for f in (pkg / "__init__.py", pkg / "python/lib/pyspark.zip", pkg / "python/lib/py4j-0.10.9.9-src.zip",
              pkg / "jars/spark-core_2.13-4.2.0.jar"):
        f.write_bytes(b"")
    return pkg


def test_only_the_installed_packages_own_archives_are_dropped(tmp_path):
    pkg = _package(tmp_path)
    lib, site = pkg / "python" / "lib", str(tmp_path / "site")
    own = [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip"), str(pkg / "jars/spark-core_2.13-4.2.0.jar")]
    user = str(tmp_path / "deps.zip")                               # a --py-files archive stays
    assert installed_archives([*own, user, str(tmp_path), site]) == own
    # Spark puts the zips first; the package is found later on the path all the same.
    assert installed_archives([site, *own]) == own
    # A Spark distribution (SPARK_HOME elsewhere): its zips are the only pyspark there is, nothing dropped.
    dist = tmp_path / "spark-4.2.0" / "python" / "lib"
    dist.mkdir(parents=True)
    assert installed_archives([str(dist / "pyspark.zip"), str(dist / "py4j-0.10.9.9-src.zip"), user]) == []
    # ... nor when an installed pyspark exists but the zips are the distribution's.
    assert installed_archives([str(dist / "pyspark.zip"), site]) == []


def test_a_sessions_python_worker_imports_the_installed_pyspark(spark):
    def probe(_: object) -> tuple[str, list[str]]:
        import sys as worker_sys

        import pyspark as worker_pyspark

        return worker_pyspark.__file__, [p for p in worker_sys.path if p.endswith((".zip", ".jar"))]

    assert spark.conf.get("spark.python.daemon.module") == "libs.spark_daemon"
    [(file, archives)] = spark.sparkContext.parallelize([0], 1).map(probe).collect()
    assert file == pyspark.__file__                                   # the installed package, not pyspark.zip
    root = Path(pyspark.__file__).parent
    assert [a for a in archives if Path(a).is_relative_to(root)] == []
