"""What the `blockheat` subcommands share: the usage and not-found errors, the subcommand parser (options added
when it parses, defaults and an example in its help), the output options and the Spark session. Imports no
subcommand module."""
from __future__ import annotations

import argparse
import difflib
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from blockheat.jobs.cli import console
from blockheat.jobs.cli.output import FORMATS, Output

T = TypeVar("T")
log = logging.getLogger(__name__)

# `blockheat --debug`: the Spark driver logs at the level of Spark's own defaults, with whole stacks
# (libs/io/log4j2.properties).
DEBUG_JAVA_OPTIONS = "-Dblockheat.log.level=warn -Dblockheat.log.stack=full"


class UsageError(ValueError):
    """Bad command-line values (exit code 2)."""


class NotFoundError(LookupError):
    """Something the command line names does not exist: a trace, a plan (exit code 1)."""


def checked(make: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """make(*args, **kwargs), a ValueError (a bad option value) raised as a UsageError."""
    try:
        return make(*args, **kwargs)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def example(*commands: str) -> str:
    """A subcommand's help epilog: one example command line (or a few)."""
    return ("example:\n" if len(commands) == 1 else "examples:\n") + "\n".join(f"  {c}" for c in commands)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's default in its help ("(default: X)", unless the text already gives it or there is none to
    give), and the examples epilog kept as written."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("default" in text or default is None or default is False or default == "" or default is argparse.SUPPRESS
                or (not action.option_strings and action.nargs not in (argparse.OPTIONAL, argparse.ZERO_OR_MORE))):
            return text
        return f"{text} (default: %(default)s)".lstrip()

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("example"):
            return "\n".join(indent + line for line in text.splitlines())
        return super()._fill_text(text, width, indent)


_INVALID_CHOICE = re.compile(r"^argument (\S+): invalid choice: '(.*)' \(choose from (.*)\)$", re.DOTALL)
_BAD_ARGUMENT = re.compile(r"^argument (\S+?)(?:/\S+)?: ")
_UNRECOGNIZED = re.compile(r"^unrecognized arguments: (.*)$", re.DOTALL)


def did_you_mean(word: str, candidates: Sequence[str], n: int = 3) -> str:
    """"; did you mean 'a' or 'b'?" for the candidates close to a mistyped `word` ("" when none is)."""
    close = difflib.get_close_matches(word, list(candidates), n=n, cutoff=0.6)
    return f"; did you mean {' or '.join(map(repr, close))}?" if close else ""


class OneLineErrors(argparse.ArgumentParser):
    """A parser whose errors are one line (exit code 2), with "did you mean" for a mistyped command, choice or
    option, and for a bad value the usage of that one argument only (not the whole usage)."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        usage = ""
        if match := _INVALID_CHOICE.match(message):
            name, given, choices = match.groups()
            hint = did_you_mean(given, re.findall(r"'([^']*)'", choices))
            if name == "COMMAND":
                message = f"unknown command {given!r}{hint} ({self.prog} --help lists the commands)"
            else:
                message = f"argument {name}: invalid choice: {given!r}{hint} (choose from {choices})"
                usage = self._usage_of(name.split("/", 1)[0])
        elif match := _UNRECOGNIZED.match(message):
            words = match.group(1).split()
            known = [o for o in self._option_string_actions if o.startswith("--")]
            hints = [f"{w} (did you mean {' or '.join(close)}?)" if (close := difflib.get_close_matches(
                w.split("=", 1)[0], known, n=2, cutoff=0.6)) else w for w in words]
            message = f"unrecognized arguments: {' '.join(hints)}"
        elif match := _BAD_ARGUMENT.match(message):
            usage = self._usage_of(match.group(1))
        self.exit(2, f"{usage}{self.prog}: error: {message}\n")

    def _usage_of(self, name: str) -> str:
        """The usage line of the one argument `name` (an option string or a positional's metavar or dest)."""
        action = self._option_string_actions.get(name) or next(
            (a for a in self._actions if name in (a.metavar, a.dest)), None)
        if action is None:
            return ""
        formatter = self._get_formatter()
        formatter.add_usage(None, [action], [])
        return formatter.format_help()

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if any(e.startswith("-") and len(e) > 1 and not e[1].isdigit() for e in extras):
            self.error(f"unrecognized arguments: {' '.join(extras)}")      # here, where its options are known
        return parsed, extras


class CommandParser(OneLineErrors):
    """A subcommand's parser. Options given to defer() are added only when this subcommand parses or prints its
    help, so that `blockheat --help` and the other subcommands do not import the job that owns them. An option it
    does not know is refused before its required arguments are checked (a mistyped --format is "did you mean
    --format", not "--format is required")."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self._deferred: list[Callable[[argparse.ArgumentParser], object]] = []
        self._by_first_word: Mapping[str, Callable[[argparse.ArgumentParser], object]] = {}

    def defer(self, add_arguments: Callable[[argparse.ArgumentParser], object], *,
              by_first_word: Mapping[str, Callable[[argparse.ArgumentParser], object]] | None = None
              ) -> CommandParser:
        """Call add_arguments(self) before this parser first parses or formats its usage or help; a parse whose first
        positional argument is a key of `by_first_word` calls that key's function instead (`plan check` takes none of
        the plan job's build options, so it does not import the job)."""
        self._deferred.append(add_arguments)
        self._by_first_word = dict(by_first_word or {})
        return self

    def _add_deferred(self, args: Sequence[str] | None = None) -> None:
        first = next((a for a in args or () if not a.startswith("-")), None)
        if self._deferred and first in self._by_first_word:
            self._deferred.clear()
            self._by_first_word[first](self)
        while self._deferred:
            self._deferred.pop(0)(self)

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        self._add_deferred(args)
        words = [] if self._subparsers is not None else list(args or [])     # `sim`: its subcommands' own options
        options = [o for o in self._option_string_actions if o.startswith("--")]
        for word in words[:words.index("--")] if "--" in words else words:
            name = word.split("=", 1)[0]
            if name.startswith("--") and not any(o.startswith(name) for o in options):   # abbreviations allowed
                self.error(f"unrecognized arguments: {word}")
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self._add_deferred()
        return super().format_usage()

    def format_help(self) -> str:
        self._add_deferred()
        return super().format_help()


def add_command(sub: Any, name: str, summary: str, examples: str | Sequence[str], *,
                description: str | None = None) -> CommandParser:
    """A subcommand `name`: `summary` in `blockheat --help`, its description (default: the summary) and
    examples in its own."""
    lines = [examples] if isinstance(examples, str) else list(examples)
    parser: CommandParser = sub.add_parser(name, help=summary, description=description or f"{summary}.",
                                           epilog=example(*lines))
    return parser


def add_output_options(parser: argparse.ArgumentParser, *, format_flag: bool = True) -> None:
    """--format table|csv|json|markdown (spelled --output-format where --format means something else, and
    accepted so everywhere) and --json, its short form."""
    flags = ["--format", "--output-format"] if format_flag else ["--output-format"]
    group = parser.add_argument_group("output")
    group.add_argument(*flags, dest="output", choices=FORMATS, default="table",
                       help="rows as an aligned table with units, CSV or JSON lines with exact values, or a "
                            "Markdown table")
    group.add_argument("--json", dest="output", action="store_const", const="json",
                       help="the same as --%s json" % ("format" if format_flag else "output-format"))


def output(args: argparse.Namespace) -> Output:
    """The command's output in its --format; the progress line is erased before it prints."""
    return Output(getattr(args, "output", "table"), before_render=console.stop_progress)


def say(text: str) -> int:
    """One result line on stdout whatever the --format (a path written, a check passed); returns 0."""
    Output("table", before_render=console.stop_progress).render()         # erases the progress line
    print(text, flush=True)
    return 0


def spark_config(args: argparse.Namespace, app: str, *, catalog: str = "in-memory", **from_env: Any) -> Any:
    """The environment's SparkConfig with this app name and catalog; with --debug, the driver logs at Spark's
    default level."""
    from blockheat.libs.io.jvm import merge_java_options  # lazy: loads only for commands that use Spark
    from blockheat.libs.io.session import SparkConfig

    cfg = replace(SparkConfig.from_env(app, **from_env), catalog=catalog)
    if getattr(args, "debug", False):
        key = "spark.driver.extraJavaOptions"
        cfg = replace(cfg, extra={**cfg.extra, key: merge_java_options(cfg.extra.get(key), DEBUG_JAVA_OPTIONS)})
    return cfg


def require_trace(trace_id: str) -> None:
    """NotFoundError, in a fraction of a second and before any Spark session, when neither the warehouse's `traces`
    table nor `requests` (read by delta-rs) has the trace `trace_id`: the ingested ids are listed, the closest
    first. A table delta-rs cannot read is left to the command's own Spark read."""
    from blockheat.libs.io import delta_log, storage  # lazy: pyarrow and delta-rs load only for these checks

    warehouse = storage.normalize(storage.warehouse_from_env())
    root = storage.join(warehouse, "traces")
    try:
        known = sorted(set(delta_log.read(root, ["trace_id"]).column("trace_id").to_pylist())) \
            if delta_log.is_table(root) else []
    except delta_log.LogUnreadable:
        return
    if trace_id in known or _has_requests(warehouse, trace_id):
        return
    if not known:
        raise NotFoundError(f"no trace {trace_id!r}: the warehouse {warehouse} holds no traces yet (blockheat ingest)")
    hint = did_you_mean(trace_id, known)
    shown = ", ".join(known[:10]) + (f" and {len(known) - 10} more" if len(known) > 10 else "")
    raise NotFoundError(f"no trace {trace_id!r} in {warehouse} (ingested: {shown}){hint}")


def _has_requests(warehouse: str, trace_id: str) -> bool:
    """Whether `requests` has files of the trace (from its log: a trace written there without a catalog row, as
    tools and tests may write one)."""
    from blockheat.libs.io import delta_log, storage  # lazy: see require_trace

    root = storage.join(warehouse, "requests")
    try:
        files = delta_log.snapshot(root).files if delta_log.is_table(root) else ()
    except delta_log.LogUnreadable:
        return True                                     # the command's own Spark read decides
    return any(f["partitionValues"].get("trace_id") == trace_id for f in files)


def require_writable_directory(option: str, path: str) -> None:
    """UsageError naming `option` when the local directory `path` cannot be made or written (checked by making it
    and a probe file in it), before any Spark session; an object-store URI is left to the write itself."""
    import tempfile

    from blockheat.libs.io import storage  # lazy: see require_trace

    if not storage.is_local(path):
        return
    where = Path(storage.normalize(path))
    try:
        where.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=where, prefix=".blockheat-probe-"):
            pass
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write there ({exc.strerror or exc})") from exc


def spark_session(args: argparse.Namespace, app: str, *, catalog: str = "in-memory", read_only: bool = False,
                  trace_id: str | None = None, lean_local: bool = False) -> tuple[Any, Any]:
    """(SparkSession, SparkConfig) of the environment's settings, with this app name and catalog; read_only: the
    session's SQL may not write (libs.io.sql_access) unless the command has --allow-writes; trace_id: an ingested
    trace the command works on, checked first (require_trace); lean_local: SparkConfig.from_env's. A JVM started
    here prints no start-up banners (unless --debug); Spark jobs show a progress line on a terminal."""
    if trace_id is not None:
        require_trace(trace_id)
    # lazy: pyspark loads only for commands that use Spark
    from pyspark.sql import SparkSession

    from blockheat.libs.io.session import build_session, cached_delta_jars

    cfg = spark_config(args, app, catalog=catalog, lean_local=lean_local)
    if read_only:
        cfg = replace(cfg, sql_guard=True, allow_writes=bool(getattr(args, "allow_writes", False)))
    starts_jvm = SparkSession.getActiveSession() is None and not cfg.remote
    if starts_jvm and cached_delta_jars() is None:
        log.info("fetching the Delta Lake jars from Maven Central (once: about 90 MB, kept under ~/.ivy2.5.2)")
    with console.quiet_stderr(starts_jvm, filtered=not getattr(args, "debug", False)):
        spark = build_session(cfg)
    if not getattr(args, "debug", False):
        quiet_query_context_loggers()
    console.SparkProgress.start(spark, app)
    return spark, cfg


def quiet_query_context_loggers() -> None:
    """pyspark logs every SQL or DataFrame error, with its JVM stack, as a JSON record on a stderr handler of its
    own (not propagated); the command prints the error itself, once."""
    from pyspark.logger import PySparkLogger  # lazy: pyspark loads only for commands that use Spark

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)
