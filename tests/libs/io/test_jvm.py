"""libs.io.jvm: the environment's JVM class archive reaches every Spark JVM blockheat starts, and a JVM really
maps it (with -Xshare:on a JVM that cannot use the archive refuses to start)."""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import blockheat.libs.io.jvm as J
from blockheat.libs import nightly as N
from blockheat.libs.io.session import LOG4J_CONFIG, SparkConfig, session_conf
from tests.builders import python_child


def test_merge_keeps_order_and_drops_repeats():
    assert J.merge_java_options("-Da=1 -Xshare:auto", None, "", "-Da=1 -XX:+UseSerialGC") == \
        "-Da=1 -Xshare:auto -XX:+UseSerialGC"


def test_flags_with_spaces_and_quotes_are_one_word_each():
    path = "/w h/it's \"x\"\\y"
    quoted = J.java_options(f"-Dderby.system.home={path}", "-Da=1")
    assert quoted == '"-Dderby.system.home=/w h/it\'s \\"x\\"\\\\y" -Da=1'
    assert shlex.split(quoted) == [f"-Dderby.system.home={path}", "-Da=1"]      # as Spark's launcher splits it
    assert J.merge_java_options(quoted, "-Da=1 -Db=2") == quoted + " -Db=2"


def test_session_conf_quotes_a_warehouse_path_with_spaces_and_quotes(tmp_path):
    warehouse = tmp_path / "it's a \"wh\""
    flags = shlex.split(session_conf(SparkConfig(master="local[1]", warehouse=warehouse))[
        "spark.driver.extraJavaOptions"])
    assert f"-Dderby.system.home={warehouse}" in flags


def test_the_lean_driver_flags_start_a_jvm_with_a_serial_gc_a_small_heap_and_the_first_jit_tier():
    """LEAN_DRIVER_OPTIONS as the environment's java takes them (a flag it refused would stop every profile's
    driver from starting)."""
    java = Path(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else shutil.which("java")
    done = subprocess.run([str(java), *J.LEAN_DRIVER_OPTIONS, "-XX:+PrintFlagsFinal", "-version"],
                          capture_output=True, text=True, check=True, timeout=60)
    flags = {f[1]: f[3] for f in (line.split() for line in done.stdout.splitlines()) if len(f) >= 4 and f[2] == "="}
    assert (flags["UseSerialGC"], flags["UseG1GC"]) == ("true", "false")
    assert (int(flags["InitialHeapSize"]), int(flags["NewSize"]), int(flags["MaxNewSize"])) == (128 << 20,
                                                                                               48 << 20, 48 << 20)
    assert (flags["MinHeapFreeRatio"], flags["MaxHeapFreeRatio"]) == ("20", "50")
    assert flags["TieredStopAtLevel"] == "1"


@pytest.fixture
def env_with_archive(tmp_path, monkeypatch):
    """This interpreter's environment moved to tmp_path, with an (empty) archive file in it."""
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    path = J.archive_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    return path


def test_session_conf_without_an_archive(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "no-venv"))
    conf = session_conf(SparkConfig(master="local[2]", warehouse=tmp_path / "wh",
                                    extra={"spark.driver.extraJavaOptions": "-XX:+UseSerialGC"}))
    assert conf["spark.driver.extraJavaOptions"] == (f"-Dderby.system.home={tmp_path / 'wh'} "
                                                     f"-Dlog4j.configurationFile={LOG4J_CONFIG} -XX:+UseSerialGC")
    assert "spark.executor.extraJavaOptions" not in conf


def test_blockheat_java_options_reach_the_driver_only(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "no-venv"))
    monkeypatch.setenv("BLOCKHEAT_JAVA_OPTIONS", " ".join(J.SHORT_JOB_OPTIONS))
    conf = session_conf(SparkConfig(master="local[2]", warehouse=tmp_path / "wh"))
    assert conf["spark.driver.extraJavaOptions"] == (f"-Dderby.system.home={tmp_path / 'wh'} "
                                                     f"-Dlog4j.configurationFile={LOG4J_CONFIG} "
                                                     "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    assert "spark.executor.extraJavaOptions" not in conf


def test_session_conf_adds_the_archive_to_driver_and_executors(tmp_path, env_with_archive):
    assert env_with_archive == tmp_path / "venv" / "var" / "blockheat" / f"spark-{J.version('pyspark')}.jsa"
    flags = f"-XX:SharedArchiveFile={env_with_archive} -Xlog:cds=off -Xlog:cds+dynamic=off"
    conf = session_conf(SparkConfig(master="local[2]", warehouse=tmp_path / "wh",
                                    extra={"spark.driver.extraJavaOptions": "-XX:+UseSerialGC",
                                           "spark.executor.extraJavaOptions": "-Dx=1", "spark.app.name": "a"}))
    assert conf["spark.driver.extraJavaOptions"] == (f"-Dderby.system.home={tmp_path / 'wh'} {flags} "
                                                     f"-Dlog4j.configurationFile={LOG4J_CONFIG} -XX:+UseSerialGC")
    assert conf["spark.executor.extraJavaOptions"] == f"{flags} -Dx=1"
    assert conf["spark.app.name"] == "a"


def test_nightly_stages_use_their_environments_archive(tmp_path, env_with_archive):
    landing = tmp_path / "landing"
    landing.mkdir()
    raw = {"landing_dir": str(landing), "warehouse": str(tmp_path / "wh"),
           "spark_conf": {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}}
    flags = f"-XX:SharedArchiveFile={env_with_archive} -Xlog:cds=off -Xlog:cds+dynamic=off"
    with_archive = N.submit_options(N.NightlySettings.from_mapping(raw, python=str(tmp_path / "venv/bin/python")),
                                    None)
    assert with_archive["conf"] == {"spark.driver.extraJavaOptions": f"{flags} -XX:TieredStopAtLevel=1",
                                    "spark.executor.extraJavaOptions": flags}
    other = N.submit_options(N.NightlySettings.from_mapping(raw, python="/elsewhere/bin/python"), None)
    assert other["conf"] == {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}


@pytest.mark.spark
def test_a_spark_jvm_maps_the_environments_archive(tmp_path):
    path = J.make_archive()                  # `make` made it already; made here when pytest runs on its own
    assert path == J.archive_path()
    assert path.stat().st_size > 50 << 20    # thousands of Spark classes, not an empty file
    child = ("import sys; from pathlib import Path; "
             "from blockheat.libs.io.session import SparkConfig, build_session; "
             "s = build_session(SparkConfig(master='local[1]', warehouse=Path(sys.argv[1]), app_name='cds', "
             "extra={'spark.driver.extraJavaOptions': '-Xshare:on'})); print('rows', s.range(3).count())")
    done = python_child(child, str(tmp_path / "wh"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == "rows 3"
