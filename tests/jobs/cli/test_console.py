"""jobs.cli.console: what reaches stderr. Start-up banners and Java stacks of child processes are dropped (not
with --debug), everything else is passed on in order; py4j's records (a retried or failed call logs its traceback
on the root logger) are not shown, the command's own lines are; a secret is masked in all of it."""
from __future__ import annotations

import logging
import secrets
import signal
import subprocess
import sys

import pytest

from blockheat.jobs.cli import console, main
from blockheat.libs.io import redaction

# What a Spark driver JVM and the Maven resolver print on a first start, between lines that must stay.
CHILD_STDERR = """\
WARNING: Using incubator modules: jdk.incubator.vector
26/11/28 22:41:46 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform... using builtin
Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties
Setting default log level to "WARN".
To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).
kept: before the resolver
:: loading settings :: url = jar:file:/x/ivy-2.5.3.jar!/org/apache/ivy/core/settings/ivysettings.xml
Ivy Default Cache set to: /root/.ivy2.5.2/cache
The jars for the packages stored in: /root/.ivy2.5.2/jars
io.delta#delta-spark_4.2_2.13 added as a dependency
:: resolving dependencies :: org.apache.spark#spark-submit-parent-1;1.0
\tconfs: [default]
\tfound io.delta#delta-storage;4.4.0 in central
:: resolution report :: resolve 11652ms :: artifacts dl 232ms
\t---------------------------------------------------------------------
\t|      default     |   83  |   0   |   0   |   5   ||   78  |   0   |
kept: a real error
\tat org.example.Main.main(Main.java:1)
\tat org.apache.spark.sql.SparkSession.$anonfun$sql$1(SparkSession.scala:459)
Caused by: java.net.ConnectException: Connection refused
\tat java.base/sun.nio.ch.Net.connect0(Native Method)
\t... 159 more
Spark master: local[*], Application Id: local-1764370000000
kept: the end
"""


def test_child_banners_are_dropped_and_the_rest_kept_in_order(capfd):
    with console.quiet_stderr():
        sys.stderr.write("kept: this process, before\n")
        subprocess.run([sys.executable, "-c", f"import sys; sys.stderr.write({CHILD_STDERR!r})"], check=True)
    sys.stderr.write("kept: this process, after\n")
    assert capfd.readouterr().err.splitlines() == [
        "kept: this process, before", "kept: before the resolver", "kept: a real error", "kept: the end",
        "kept: this process, after"]


def test_a_failed_resolution_is_shown_from_its_summary_on(capfd):
    lines = ":: loading settings :: url = x\n\tfound a#b;1 in central\n\t:: problems summary ::\n\t\tunresolved a#c\n"
    with console.quiet_stderr():
        subprocess.run([sys.executable, "-c", f"import sys; sys.stderr.write({lines!r})"], check=True)
    assert capfd.readouterr().err.splitlines() == ["\t:: problems summary ::", "\t\tunresolved a#c"]


def test_unfiltered_stderr_keeps_banners_and_stacks(capfd):
    with console.quiet_stderr(filtered=False):
        subprocess.run([sys.executable, "-c", f"import sys; sys.stderr.write({CHILD_STDERR!r})"], check=True)
    assert capfd.readouterr().err == CHILD_STDERR


def test_quiet_stderr_off_passes_everything(capfd):
    banner = 'Setting default log level to "WARN".\n'
    with console.quiet_stderr(enabled=False):
        subprocess.run([sys.executable, "-c", f"import sys; sys.stderr.write({banner!r})"], check=True)
    assert capfd.readouterr().err == 'Setting default log level to "WARN".\n'


def py4j_record(level: int) -> logging.LogRecord:
    """What py4j.java_gateway logs on the root logger when the JVM side of a call went away."""
    try:
        raise ConnectionError("Answer from Java side is empty")
    except ConnectionError:
        return logging.LogRecord("root", level, "/venv/site-packages/py4j/java_gateway.py", 1059,
                                 "Exception while sending command.", None, sys.exc_info())


@pytest.mark.parametrize("debug", [False, True])
def test_py4j_tracebacks_only_with_debug(capsys, debug):
    handler = console.stderr_handler(debug)
    for record in (py4j_record(logging.INFO), py4j_record(logging.ERROR),
                   logging.LogRecord("blockheat.libs.io.session", logging.INFO, "session.py", 1,
                                     "spark 4.2.0 master=local[2]", None, None),
                   logging.LogRecord("some.library", logging.INFO, "lib.py", 1, "chatter", None, None),
                   logging.LogRecord("some.library", logging.WARNING, "lib.py", 1, "a library warning", None, None)):
        handler.handle(record)
    err = capsys.readouterr().err
    assert "blockheat: spark 4.2.0 master=local[2]\n" in err
    assert "blockheat: a library warning\n" in err
    assert "chatter" not in err
    assert ("Answer from Java side is empty" in err) is debug
    assert ("Traceback" in err) is debug


@pytest.mark.parametrize("filtered", [True, False])
def test_secrets_are_masked_on_stderr_and_in_a_childs_stderr(capfd, filtered):
    token = secrets.token_urlsafe(32)
    redaction.register(token)
    with console.quiet_stderr(filtered=filtered):
        console.write_stderr(f"blockheat: spark connect sc://localhost:1/;token={token}\n")
        subprocess.run([sys.executable, "-c", f"import sys; sys.stderr.write('child {token}\\n')"], check=True)
    console.write_stderr(f"after {token}\n")
    assert capfd.readouterr().err.splitlines() == [
        f"blockheat: spark connect sc://localhost:1/;token={redaction.MASK}", f"child {redaction.MASK}",
        f"after {redaction.MASK}"]


def test_a_debug_traceback_is_masked(capsys):
    token = secrets.token_urlsafe(32)
    redaction.register(token)
    try:
        raise RuntimeError(f"cannot reach sc://localhost:1/;token={token}")
    except RuntimeError as exc:
        main._masked_traceback(type(exc), exc, exc.__traceback__)
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):\n")
    assert err.endswith(f"RuntimeError: cannot reach sc://localhost:1/;token={redaction.MASK}\n")
    assert token not in err


# A command in the background of a shell (`blockheat connect-server &`): SIGINT ignored, in it and in its child.
BACKGROUND_SERVER = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
from blockheat.jobs.cli import console
child = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); print('up', flush=True); time.sleep(120)"
sys.exit(-console.run_child([sys.executable, "-c", child], os.environ, quiet=False, server=True))
"""


def test_sigint_stops_a_server_child_started_in_the_background():
    proc = subprocess.Popen([sys.executable, "-c", BACKGROUND_SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "up\n"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == signal.SIGTERM          # the child was stopped with SIGTERM
    finally:
        proc.kill()
