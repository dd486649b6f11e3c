"""The Python workers' daemon (libs.io.spark_daemon): the archives it drops from the workers' path, the modules it
imports before it forks, and a real worker of the session importing pyspark from the installed package, forked
from a daemon that holds Arrow and numba."""
from __future__ import annotations

from pathlib import Path

import pyspark

from blockheat.libs.io.spark_daemon import WORKER_MODULES, installed_archives, preimport, worker_modules


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


def test_the_worker_modules_import_and_a_missing_one_is_left_to_the_worker(monkeypatch):
    monkeypatch.delenv("BLOCKHEAT_WORKER_MODULES", raising=False)
    assert worker_modules() == list(WORKER_MODULES)
    assert preimport(list(WORKER_MODULES)) == list(WORKER_MODULES)   # all of them import in this environment
    assert preimport(["json", "blockheat_no_such_module", "libs.no_such_module", "csv"]) == ["json", "csv"]
    monkeypatch.setenv("BLOCKHEAT_WORKER_MODULES", " json, csv ,")
    assert worker_modules() == ["json", "csv"]
    monkeypatch.setenv("BLOCKHEAT_WORKER_MODULES", "")
    assert worker_modules() == []


def test_what_a_preimported_module_prints_goes_to_standard_error(tmp_path, monkeypatch, capsys):
    """The daemon's standard output carries its port to the JVM: a module printing at import must not reach it."""
    (tmp_path / "blockheat_test_chatty.py").write_text("print('[cache] index loaded')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert preimport(["blockheat_test_chatty"]) == ["blockheat_test_chatty"]
    out, err = capsys.readouterr()
    assert (out, err) == ("", "[cache] index loaded\n")


def test_a_sessions_python_worker_imports_the_installed_pyspark(spark):
    def probe(_: object) -> tuple[str, list[str], str]:
        import os as worker_os
        import sys as worker_sys

        import pyspark as worker_pyspark

        with open(f"/proc/{worker_os.getppid()}/maps") as maps:             # the daemon that forked this worker
            daemon_maps = maps.read()
        return (worker_pyspark.__file__, [p for p in worker_sys.path if p.endswith((".zip", ".jar"))],
                daemon_maps)

    assert spark.conf.get("spark.python.daemon.module") == "blockheat.libs.io.spark_daemon"
    [(file, archives, daemon_maps)] = spark.sparkContext.parallelize([0], 1).map(probe).collect()
    assert file == pyspark.__file__                                   # the installed package, not pyspark.zip
    root = Path(pyspark.__file__).parent
    assert [a for a in archives if Path(a).is_relative_to(root)] == []
    # The daemon imported Arrow and numba before it forked: their native libraries are mapped in it.
    assert "/libarrow.so" in daemon_maps
    assert "/libllvmlite.so" in daemon_maps
