"""What the `blockheat` subcommands share: the usage and not-found errors, the subcommand parser (options added
when it parses, defaults and an example in its help), the output options and the Spark session. Imports no
subcommand module."""
from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

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


class CommandParser(argparse.ArgumentParser):
    """A subcommand's parser. Options given to defer() are added only when this subcommand parses or prints its
    help, so that `blockheat --help` and the other subcommands do not import the job that owns them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self._deferred: list[Callable[[argparse.ArgumentParser], object]] = []

    def defer(self, add_arguments: Callable[[argparse.ArgumentParser], object]) -> CommandParser:
        """Call add_arguments(self) before this parser first parses or formats its usage or help."""
        self._deferred.append(add_arguments)
        return self

    def _add_deferred(self) -> None:
        while self._deferred:
            self._deferred.pop(0)(self)

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        self._add_deferred()
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


def spark_session(args: argparse.Namespace, app: str, *, catalog: str = "in-memory",
                  read_only: bool = False) -> tuple[Any, Any]:
    """(SparkSession, SparkConfig) of the environment's settings, with this app name and catalog; read_only: the
    session's SQL may not write (libs.io.sql_access) unless the command has --allow-writes. A JVM started here
    prints no start-up banners (unless --debug); Spark jobs show a progress line on a terminal."""
    # lazy: pyspark loads only for commands that use Spark
    from pyspark.sql import SparkSession

    from blockheat.libs.io.session import build_session, cached_delta_jars

    cfg = spark_config(args, app, catalog=catalog)
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
