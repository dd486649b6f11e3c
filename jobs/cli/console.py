"""The terminal side of the `blockheat` command: its log lines, the Spark JVM's stderr without start-up banners,
a progress line for long Spark jobs, and child processes (spark-sql, beeline, servers).

With --debug the JVM's output passes unfiltered and py4j's log records are shown.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from blockheat.libs.io import redaction

# The package whose INFO lines are the command's own progress; any other library shows warnings and errors only.
OWN_PACKAGES = ("blockheat",)
PROGRESS_DELAY_S = 5.0
PROGRESS_EVERY_S = 0.5
# Lines that the JVM, Spark, Hadoop and spark-sql print on start whatever the log level: not a command's output.
BANNERS = re.compile(
    r"^(WARNING: Using incubator modules: "
    r"|Using Spark's default log4j profile: "
    r'|Setting default log level to "'
    r"|To adjust logging level use sc\.setLogLevel"
    r"|\S+ \S+ WARN NativeCodeLoader: "
    r"|Spark master: .*, Application Id: "
    r"|Spark Web UI available at )")
# The Maven resolver's report when Spark resolves the Delta jars (first start only): it begins with one of these
# lines, and its other lines are indented, ":: "-prefixed or these; an unresolved dependency's summary is kept.
RESOLVER_START = re.compile(r"^(:: loading settings :: |Ivy Default Cache set to: )")
RESOLVER_LINE = re.compile(r"^(\s|:: |Ivy Default Cache set to: |The jars for the packages stored in: "
                           r"|\S+#\S+ added as a dependency$|downloading |-{10,})")
RESOLVER_PROBLEMS = re.compile(r"problems summary|UNRESOLVED DEPENDENCIES")
# A Java stack's lines (frames, "... N more", the causes' headers): without --debug a command prints its error in one
# line, and a JVM's or child's logged exception keeps its first line only (libs/io/log4j2.properties).
JAVA_STACK = re.compile(r"^(\s+at [\w$.<>/-]+\(.*\)\s*$|\s+\.\.\. \d+ more\s*$|\s*(Caused by|Suppressed): )")
_MARK = b"\0blockheat-stderr-mark\n"


def _from_py4j(record: logging.LogRecord) -> bool:
    # py4j logs a failed or retried call with its traceback on the root logger (logging.info / logging.exception
    # in py4j.java_gateway), so its records are told by the file that made them.
    return record.name.startswith("py4j") or f"{os.sep}py4j{os.sep}" in record.pathname


class _Shown(logging.Filter):
    """The records the command prints: its own packages' at the configured level; other libraries' warnings and
    errors, but py4j's never unless --debug (a call retried on a fresh connection logs a traceback at INFO)."""

    def __init__(self, debug: bool) -> None:
        super().__init__()
        self.debug = debug

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.split(".", 1)[0] in OWN_PACKAGES:
            return True
        if _from_py4j(record):
            return self.debug
        return record.levelno >= logging.WARNING


class _StderrHandler(logging.Handler):
    """Writes to whatever sys.stderr is at the time (tests swap it), clearing the progress line first."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            write_stderr(self.format(record) + "\n")
        except Exception:
            self.handleError(record)


def stderr_handler(debug: bool) -> logging.Handler:
    """The command's log handler: `blockheat: message` lines on stderr, filtered by _Shown."""
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("blockheat: %(message)s"))
    handler.addFilter(_Shown(debug))
    return handler


def configure_logging(debug: bool) -> None:
    """The project's INFO lines (DEBUG with --debug) and other libraries' warnings on stderr. As
    logging.basicConfig, it leaves a process whose logging is configured already alone (a test run, a program
    calling main()); it replaces its own handler (main() may run several times in one process)."""
    root = logging.getLogger()
    if any(not isinstance(h, _StderrHandler) for h in root.handlers):
        return
    for handler in list(root.handlers):
        root.removeHandler(handler)
    redaction.from_environment()
    root.addHandler(stderr_handler(debug))
    for name in OWN_PACKAGES:
        logging.getLogger(name).setLevel(logging.DEBUG if debug else logging.INFO)
    for noisy in ("py4j", "numba"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def write_stderr(text: str) -> None:
    """Write to stderr with every secret masked (libs.io.redaction); a progress line on the terminal is cleared
    first and drawn again after."""
    text = redaction.redact(text)
    if _bars:
        from tqdm import tqdm  # lazy: only while a progress line is shown

        with tqdm.external_write_mode(file=sys.stderr):
            sys.stderr.write(text)
            sys.stderr.flush()
    else:
        sys.stderr.write(text)
        sys.stderr.flush()


class _Forwarder(threading.Thread):
    """Copies lines from a pipe to the real stderr with their secrets masked, without banners, the resolver's report
    and Java stacks unless unfiltered (--debug)."""

    def __init__(self, read_fd: int, real_fd: int, filtered: bool = True) -> None:
        super().__init__(name="blockheat-stderr", daemon=True)
        self.read_fd, self.real_fd = read_fd, real_fd
        self.filtered = filtered
        self.marked = threading.Event()
        self.resolving = False

    def keep(self, line: str) -> bool:
        if not self.filtered:
            return True
        if JAVA_STACK.match(line):
            return False
        if self.resolving:
            if RESOLVER_PROBLEMS.search(line):
                self.resolving = False            # a failed resolution is shown from its summary on
                return True
            if RESOLVER_LINE.match(line):
                return False
            self.resolving = False
        if RESOLVER_START.match(line):
            self.resolving = True
            return False
        return not BANNERS.match(line)

    def run(self) -> None:
        with os.fdopen(self.read_fd, "rb") as pipe:
            for raw in pipe:
                if raw == _MARK:
                    self.marked.set()
                    continue
                if self.keep(raw.decode(errors="replace").rstrip("\r\n")):
                    self._write(redaction.redact_bytes(raw))
        self.marked.set()

    def _write(self, raw: bytes) -> None:
        with contextlib.suppress(OSError):
            if _bars:
                from tqdm import tqdm  # lazy: only while a progress line is shown

                with tqdm.external_write_mode(file=sys.stderr):
                    os.write(self.real_fd, raw)
            else:
                os.write(self.real_fd, raw)


@contextlib.contextmanager
def quiet_stderr(enabled: bool = True, filtered: bool = True) -> Iterator[None]:
    """While inside, file descriptor 2 is a pipe whose lines reach the real stderr with their secrets masked and,
    when filtered, without the JVM's, Spark's and the resolver's start-up lines. A JVM (or any child) started
    inside keeps the pipe as its stderr, so its output stays masked for its whole life; this process writes to
    the real stderr again on leaving, once everything written before has been passed on."""
    if not enabled:
        yield
        return
    sys.stderr.flush()
    real = os.dup(2)                       # stays open: the forwarder writes the JVM's lines to it
    read_fd, write_fd = os.pipe()
    forwarder = _Forwarder(read_fd, real, filtered)
    forwarder.start()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    try:
        yield
    finally:
        sys.stderr.flush()
        with contextlib.suppress(OSError):
            os.write(2, _MARK)
        os.dup2(real, 2)
        forwarder.marked.wait(2.0)


# Progress lines on the terminal now (tqdm bars); write_stderr and the forwarder clear them before writing.
_bars: list[Any] = []
_progress: list[SparkProgress] = []


class SparkProgress:
    """A progress line on stderr for the Spark jobs of a command: the running jobs' tasks (done / all, percentage,
    tasks per second, time left), polled from SparkContext.statusTracker(). It appears once the command has run
    PROGRESS_DELAY_S, starts over with each new job and is erased when the command prints its result. Stages
    that a job skips (their output is reused) are not counted."""

    def __init__(self, spark: Any, label: str) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.label = label
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="blockheat-progress", daemon=True)
        self.bar: Any = None
        self.jobs: tuple[int, ...] = ()

    @classmethod
    def start(cls, spark: Any, label: str) -> SparkProgress | None:
        """A running progress line for `spark` when stderr is a terminal and the session has a SparkContext
        (a Spark Connect client has none: no progress line)."""
        from blockheat.libs.io.connect import is_remote  # lazy: pyspark loads only for commands that use Spark

        if not sys.stderr.isatty() or is_remote(spark):
            return None
        progress = cls(spark, label)
        progress.thread.start()
        _progress.append(progress)
        return progress

    def counts(self) -> tuple[tuple[int, ...], int, int]:
        """(running job ids, tasks, tasks done) of the running jobs."""
        jobs = tuple(self.tracker.getActiveJobsIds())
        total = done = 0
        for job in jobs:
            info = self.tracker.getJobInfo(job)
            stages = [s for i in (info.stageIds if info else []) if (s := self.tracker.getStageInfo(i)) is not None]
            last = max((s.stageId for s in stages if s.numActiveTasks or s.numCompletedTasks), default=-1)
            for s in stages:
                if s.stageId < last and not (s.numActiveTasks or s.numCompletedTasks):
                    continue                      # skipped: a later stage of the job already runs
                total += s.numTasks
                done += s.numCompletedTasks
        return jobs, total, done

    def _run(self) -> None:
        if self.stopped.wait(PROGRESS_DELAY_S):
            return
        while not self.stopped.is_set():
            with contextlib.suppress(Exception):     # the tracker may go away as the command ends
                self._show(*self.counts())
            self.stopped.wait(PROGRESS_EVERY_S)

    def _show(self, jobs: tuple[int, ...], total: int, done: int) -> None:
        from tqdm import tqdm  # lazy: loads only when a command runs long enough to show progress

        if not jobs or not total or self.stopped.is_set():
            return
        if self.bar is None:
            tqdm.monitor_interval = 0              # no monitor thread: this thread refreshes the line
            self.bar = tqdm(total=total, desc=self.label, unit="task", file=sys.stderr, leave=False,
                            dynamic_ncols=True, smoothing=0)
            _bars.append(self.bar)
        elif jobs != self.jobs:
            self.bar.reset(total=total)           # a new job: its own count, rate and time left
        self.jobs = jobs
        self.bar.total = total
        self.bar.n = min(done, total)
        self.bar.refresh()

    def stop(self) -> None:
        """Stop polling and erase the line."""
        self.stopped.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(5.0)
        if self.bar is not None:
            self.bar.close()
            _bars.remove(self.bar)
            self.bar = None


def stop_progress() -> None:
    """Erase every progress line (before a command prints its result, and when it ends)."""
    while _progress:
        _progress.pop().stop()


def run_child(cmd: Sequence[str], env: Mapping[str, str], *, quiet: bool = True, server: bool = False) -> int:
    """Run a child (spark-sql, beeline, a server) to its end and return its exit code: its stderr with secrets
    masked and without start-up banners (unless not `quiet`); Ctrl-C is the child's (a shell stops its statement,
    a server stops; this process does not die under it) and SIGTERM is passed on to it. server: SIGINT stops the
    child too (SIGTERM), also when it came with SIGINT ignored, as a shell starts a job in the background (`&`)."""
    with quiet_stderr(filtered=quiet):
        child = subprocess.Popen(list(cmd), env=dict(env))
    on_interrupt = (lambda *_: child.terminate()) if server else signal.SIG_IGN
    previous = {signal.SIGINT: signal.signal(signal.SIGINT, on_interrupt),
                signal.SIGTERM: signal.signal(signal.SIGTERM, lambda *_: child.terminate())}
    try:
        return child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


__all__ = ["SparkProgress", "configure_logging", "quiet_stderr", "run_child", "stderr_handler", "stop_progress",
           "write_stderr"]
