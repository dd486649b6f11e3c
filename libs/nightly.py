"""The nightly DAG's glue (dags/nightly_trace_analysis.py), no Airflow and no Spark session: landing folders and
their manifests, the trace day a run analyses, the ingest ledger, each Spark stage's job arguments, and
Delta table versions and commits read through delta-rs (libs.io.delta_log: so that XCom carries versions and
counts, never data).

Choices (each tested in tests/libs/test_nightly.py):
- a landing folder is <landing>/<trace_id>/ with manifest.json ({"format": ..., "start_date": "YYYY-MM-DD",
  optional "days": N}) and the trace's files; names starting with "." or "_" are ignored (land a file under
  such a name and rename it when complete), as are sub-folders. Files are taken in name order (the order
  ingest numbers records in), and a file whose content (SHA-256) equals an earlier one is a duplicate, left out.
- a landed file is hashed once: <warehouse>/_nightly/digests.json keeps each file's SHA-256 with its size,
  modification and change times and inode, and later runs reuse it while all four are unchanged (the change
  time moves on every write and cannot be set back, so a file rewritten in place is hashed again).
- start_date is the calendar date (UTC) of trace day 0: the run whose data interval starts on date D analyses
  trace day D - start_date, i.e. [day * 24 h, (day + 1) * 24 h) after the trace's first request (the intervals
  of aged_heat and the ALIS graphs). A trace takes part while 0 <= day < days (no "days": open-ended).
- the warehouse may be a local directory or an object-store URI (s3a://bucket/prefix, libs.io.storage): the
  ledger and the digests are written there (a local file through a temporary file and a rename, an object in
  one PUT: either way it appears whole or not at all). The landing directory is local (see scan_landing).
- the ledger (<warehouse>/_nightly/ledger/<trace_id>.json) records per trace the fingerprint (format and the
  ordered SHA-256 of its distinct files) last ingested, and the one (with the stage arguments) the whole-trace
  stages last succeeded on. A run ingests a trace when its fingerprint differs from the ingested one, so a file
  that lands twice (under any name) is ingested once. When the ingested files are the first of the landed ones
  (the same format), only the files after them are ingested, appended to the trace (`--append --allow-overlap`:
  a late file is merged in); otherwise (a file changed, went away or lands before an ingested one in name order)
  the trace is ingested again whole. The whole-trace stages (extent heat, tracking, profile,
  report) run when the data or their arguments changed since they last succeeded; the interval stages (aged
  counts, graph, layout, scorecard, plans) run every day the trace takes part.
"""
from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from blockheat.libs.io import storage
from blockheat.libs.io.jvm import JAVA_OPTION_KEYS, archive_options, java_options, merge_java_options, prefix_of

DAY_S = 86_400
MANIFEST = "manifest.json"
LEDGER_DIR = Path("_nightly") / "ledger"
DIGESTS = Path("_nightly") / "digests.json"
SETTINGS_VARIABLE = "blockheat_nightly"
PLAN_EXPORT_OPTION = "--export"  # jobs/reorg_plan.py: also write the plan to DIR/<plan_id>.json
# The Spark stages of one run, in DAG order; each is jobs/<stage>.py.
WHOLE_TRACE_STAGES = ("extent_heat", "heat_tracking", "trace_profile", "heat_report")
INTERVAL_STAGES = ("aged_heat", "alis_graph", "alis_layout", "policy_scores", "reorg_plan")
STAGES = ("ingest_trace", *WHOLE_TRACE_STAGES, *INTERVAL_STAGES)
# Tables the stages write (what the run's summary reports).
TABLES = ("requests", "rejected_records", "traces", "extent_heat", "disk_heat", "heat_tracking", "tracking_eval",
          "trace_profile", "aged_heat", "reorg_units", "access_graph", "alis_runs", "alis_graphs", "alis_layout",
          "alis_summary", "sim_results", "sim_timeseries", "cooling_moves", "policy_scores", "reorg_plans",
          "reorg_plan_steps")
#: A local path or an object-store URI (libs.io.storage).
Location = str | os.PathLike[str]


class LandingError(ValueError):
    """A landing folder, manifest or file the nightly run cannot use; the message names it."""


class SettingsError(ValueError):
    """The nightly settings (Airflow Variable blockheat_nightly) are missing a key or hold a bad value."""


@dataclass(frozen=True)
class Manifest:
    trace_id: str
    format: str
    start_date: dt.date
    days: int | None = None  # None: open-ended

    def day(self, interval_start: dt.date) -> int:
        """The trace day a run whose data interval starts on interval_start analyses."""
        return (interval_start - self.start_date).days

    def takes_part(self, day: int) -> bool:
        return day >= 0 and (self.days is None or day < self.days)


@dataclass(frozen=True)
class LandedFile:
    path: str
    size_bytes: int
    sha256: str


@dataclass(frozen=True)
class Landing:
    """A trace's landed files: distinct contents in name order, and the duplicates left out."""

    manifest: Manifest
    files: tuple[LandedFile, ...]
    duplicates: tuple[tuple[str, str], ...] = ()  # (duplicate path, path of the same content kept)

    @property
    def fingerprint(self) -> dict[str, Any]:
        return {"format": self.manifest.format, "sha256": [f.sha256 for f in self.files]}


def read_manifest(folder: Path, formats: Sequence[str]) -> Manifest:
    """The folder's manifest.json; LandingError naming the file and the problem."""
    from blockheat.libs.io.tables import TraceIdError, check_trace_id  # lazy: pyspark stays out of the DAG's parse

    path = folder / MANIFEST
    if not path.is_file():
        raise LandingError(f"landing folder {folder} has no {MANIFEST} (format and start_date of the trace)")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LandingError(f"{path}: not JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise LandingError(f"{path}: expected a JSON object, got {type(raw).__name__}")
    unknown = sorted(set(raw) - {"format", "start_date", "days"})
    if unknown:
        raise LandingError(f"{path}: unknown keys {unknown} (known: format, start_date, days)")
    fmt = raw.get("format")
    if fmt not in formats:
        raise LandingError(f"{path}: format {fmt!r} is not one of {list(formats)}")
    try:
        start = dt.date.fromisoformat(str(raw.get("start_date")))
    except ValueError as exc:
        raise LandingError(f"{path}: start_date {raw.get('start_date')!r} is not a date YYYY-MM-DD") from exc
    days = raw.get("days")
    if days is not None and (isinstance(days, bool) or not isinstance(days, int) or days < 1):
        raise LandingError(f"{path}: days must be a positive integer, got {days!r}")
    try:
        trace_id = check_trace_id(folder.name)
    except TraceIdError as exc:
        raise LandingError(f"landing folder {folder}: the folder name is the trace id; {exc}") from exc
    return Manifest(trace_id, str(fmt), start, days)


def _sha256(path: Path) -> str:
    from blockheat.libs.io.inputs import file_sha256  # lazy: numpy and zstandard stay out of the DAG's parse

    return file_sha256(path)


def _location(where: Location) -> Path | str:
    """A location as this module keeps it: a Path for a local one, the URI as a string otherwise
    (Path("s3a://b/p") would collapse the "//")."""
    text = os.fspath(where)
    kind = storage.scheme(text)
    if kind == "":
        return Path(text)
    return Path(storage.normalize(text)) if kind == "file" else storage.normalize(text)


def _under(base: Location, *parts: str) -> Path | str:
    """base/part/...: a Path under a local base, a URI under a URI."""
    where = _location(base)
    return where.joinpath(*parts) if isinstance(where, Path) else storage.join(where, *parts)


def _write_json(where: Location, doc: dict[str, Any]) -> None:
    """Write a JSON document atomically: locally a temporary file beside it, then renamed over it; on an object
    store one PUT (an object is replaced whole or not at all)."""
    data = (json.dumps(doc, sort_keys=True, indent=1) + "\n").encode("utf-8")
    path = _location(where)
    if not isinstance(path, Path):
        storage.write_bytes(path, data)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_bytes(data)
    partial.replace(path)


def _read_json(where: Location) -> Any:
    return json.loads(storage.read_bytes(os.fspath(where)).decode("utf-8"))


def _file_key(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def read_digests(warehouse: Location) -> dict[str, Any]:
    """The landed files' digests recorded by earlier runs ({} when none, or the file is damaged: each file is
    then hashed again)."""
    try:
        raw = _read_json(_under(warehouse, *DIGESTS.parts))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return dict(raw) if isinstance(raw, dict) else {}


def write_digests(warehouse: Location, digests: Mapping[str, Any]) -> None:
    """Record the digests; atomic (_write_json)."""
    _write_json(_under(warehouse, *DIGESTS.parts), dict(digests))


def scan_landing(folder: Path, manifest: Manifest, digests: dict[str, Any] | None = None) -> Landing:
    """The trace's data files (see the module docstring for what counts and in which order). digests: known
    SHA-256s by absolute path (read_digests), reused for files unchanged since and updated in place."""
    # The landing directory stays local: digests are reused by stat keys (inode, ctime) no object store has.
    kept: dict[str, LandedFile] = {}
    duplicates = []
    for path in sorted(folder.iterdir(), key=lambda p: p.name):
        if path.name == MANIFEST or path.name.startswith((".", "_")) or not path.is_file():
            continue
        name, key = str(path.resolve()), _file_key(path.stat())
        known = (digests or {}).get(name)
        if isinstance(known, dict) and known.get("stat") == key and isinstance(known.get("sha256"), str):
            sha = known["sha256"]
        else:
            sha = _sha256(path)
            if digests is not None:
                digests[name] = {"stat": key, "sha256": sha}
        if sha in kept:
            duplicates.append((str(path), kept[sha].path))
        else:
            kept[sha] = LandedFile(str(path.resolve()), path.stat().st_size, sha)
    return Landing(manifest, tuple(kept.values()), tuple(duplicates))


@dataclass(frozen=True)
class NightlySettings:
    """Where the run reads and writes, and the analysis options; from the Airflow Variable blockheat_nightly."""

    landing_dir: Path                             # local: the landed files are scanned by their stat keys
    warehouse: Path | str                         # a local directory or an object-store URI (libs.io.storage)
    reports_dir: Path | str
    exports_dir: Path | str
    python: str
    spark_conf: dict[str, str] = field(default_factory=dict)
    jars: str = ""                                # "": the Delta jars blockheat cached, else --packages
    tracking_ks: tuple[int, ...] = (5, 10, 20, 50)
    tracking_eval: dict[str, float] = field(default_factory=dict)   # extents, change_s, end_s
    scorecard_args: tuple[str, ...] = ()
    plan_policies: tuple[str, ...] = ("best",)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], *, python: str) -> NightlySettings:
        """Validate the Variable's JSON; python: the interpreter for Spark's Python side (PYSPARK_PYTHON)."""
        where = f"Airflow Variable {SETTINGS_VARIABLE}"
        known = {"landing_dir", "warehouse", "reports_dir", "exports_dir", "python", "spark_conf", "jars",
                 "tracking_ks", "tracking_eval", "scorecard_args", "plan_policies"}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise SettingsError(f"{where}: unknown keys {unknown} (known: {sorted(known)})")
        missing = [k for k in ("landing_dir", "warehouse") if not raw.get(k)]
        if missing:
            raise SettingsError(f"{where}: {missing} must be set (absolute paths; the warehouse may be a URI)")
        try:
            places = {k: _location(str(raw[k])) for k in ("landing_dir", "warehouse", "reports_dir", "exports_dir")
                      if raw.get(k)}
        except storage.StorageError as exc:
            raise SettingsError(f"{where}: {exc}") from exc
        if not isinstance(places["landing_dir"], Path):
            raise SettingsError(f"{where}: landing_dir must be a local directory, got {raw['landing_dir']!r}")
        relative = sorted(k for k, p in places.items() if isinstance(p, Path) and not p.is_absolute())
        if relative:
            raise SettingsError(f"{where}: {relative} must be absolute paths (the Spark jobs run elsewhere)")
        warehouse = places["warehouse"]
        ks = tuple(raw.get("tracking_ks", cls.tracking_ks))
        if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
            raise SettingsError(f"{where}: tracking_ks must be a list of positive integers, got {ks}")
        evals = dict(raw.get("tracking_eval") or {})
        if set(evals) - {"extents", "change_s", "end_s"}:
            raise SettingsError(f"{where}: tracking_eval keys are extents, change_s, end_s; got {sorted(evals)}")
        policies = tuple(str(p) for p in raw.get("plan_policies", cls.plan_policies))
        if not policies:
            raise SettingsError(f"{where}: plan_policies is empty (use [\"best\"] for the best-ranked policy)")
        return cls(
            landing_dir=Path(places["landing_dir"]), warehouse=warehouse,
            reports_dir=places.get("reports_dir", _under(warehouse, "reports")),
            exports_dir=places.get("exports_dir", _under(warehouse, "exports")),
            python=str(raw.get("python") or python),
            spark_conf={str(k): str(v) for k, v in dict(raw.get("spark_conf") or {}).items()},
            jars=str(raw.get("jars") or ""), tracking_ks=ks, tracking_eval=evals,
            scorecard_args=tuple(str(a) for a in raw.get("scorecard_args") or ()), plan_policies=policies)


def delta_package() -> str:
    """Maven coordinate of the installed delta-spark for this pyspark (as configure_spark_with_delta_pip
    builds it)."""
    spark = ".".join(metadata.version("pyspark").split(".")[:2])
    return f"io.delta:delta-spark_{spark}_2.13:{metadata.version('delta-spark')}"


def submit_options(settings: NightlySettings, jars: Sequence[str] | None) -> dict[str, Any]:
    """SparkSubmitOperator keyword arguments shared by every stage: Delta on the classpath (the jars an
    earlier blockheat session resolved, else Maven --packages), the warehouse, Spark's Python, the conf."""
    conf = dict(settings.spark_conf)
    archive = java_options(*archive_options(prefix_of(settings.python)))   # the stages' environment's, if made
    if archive:
        conf.update({k: merge_java_options(archive, conf.get(k)) for k in JAVA_OPTION_KEYS})
    opts: dict[str, Any] = {
        "conf": conf,
        "env_vars": {"BLOCKHEAT_WAREHOUSE": str(settings.warehouse), "PYSPARK_PYTHON": settings.python,
                     "PYSPARK_DRIVER_PYTHON": settings.python},
    }
    if settings.jars or jars:
        opts["jars"] = settings.jars or ",".join(jars or ())
    else:
        opts["packages"] = delta_package()
    return opts


def day_window(day: int) -> str:
    """The scorecard window (policy_scores --window) of a trace day, in seconds from the trace start."""
    return f"{day * DAY_S}:{(day + 1) * DAY_S}"


def stage_args(settings: NightlySettings, landing: Landing, day: int, *,
               now: dt.datetime) -> dict[str, list[list[str]]]:
    """application_args of every stage for one trace and day (reorg_plan: one per plan policy)."""
    tid = landing.manifest.trace_id
    tracking = [tid, "--eval", "--ks", ",".join(str(k) for k in settings.tracking_ks)]
    for key, option in (("extents", "--eval-extents"), ("change_s", "--eval-change"), ("end_s", "--eval-end")):
        if key in settings.tracking_eval:
            tracking += [option, str(settings.tracking_eval[key])]
    window = day_window(day)
    exports = str(_under(settings.exports_dir, tid))
    return {
        "ingest_trace": [["--format", landing.manifest.format, "--trace-id", tid, *(f.path for f in landing.files)]],
        "extent_heat": [[tid]],
        "heat_tracking": [tracking],
        "trace_profile": [[tid]],
        "heat_report": [[tid, "--out", str(_under(settings.reports_dir, tid))]],
        "aged_heat": [[tid, "--interval-index", str(day)]],
        "alis_graph": [[tid, "--interval-index", str(day), "--no-runs"]],    # alis_layout writes the runs
        "alis_layout": [[tid]],
        "policy_scores": [["--trace-id", tid, "--window", window, *settings.scorecard_args]],
        "reorg_plan": [["--trace-id", tid, "--policy", policy, "--window", window, "--now", now.isoformat(),
                        PLAN_EXPORT_OPTION, exports] for policy in settings.plan_policies],
    }


# --- ledger --------------------------------------------------------------------------------------


def ledger_path(warehouse: Location, trace_id: str) -> Path | str:
    """<warehouse>/_nightly/ledger/<trace_id>.json: a Path under a local warehouse, a URI under a URI."""
    return _under(warehouse, *LEDGER_DIR.parts, f"{trace_id}.json")


def read_ledger(warehouse: Location, trace_id: str) -> dict[str, Any]:
    """The trace's ledger ({} before its first ingest); LandingError naming a damaged file."""
    path = ledger_path(warehouse, trace_id)
    if not storage.is_file(os.fspath(path)):
        return {}
    try:
        raw = _read_json(path)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LandingError(f"ledger {path} is damaged ({exc}); delete it to re-ingest the trace") from exc
    return dict(raw)


def record_ledger(warehouse: Location, trace_id: str, key: str, entry: Mapping[str, Any]) -> Path | str:
    """Set the ledger's `key` ("ingested" or "analysed") to `entry`; atomic (_write_json)."""
    if key not in ("ingested", "analysed"):
        raise ValueError(f"ledger key must be 'ingested' or 'analysed', got {key!r}")
    path = ledger_path(warehouse, trace_id)
    _write_json(path, {**read_ledger(warehouse, trace_id), "trace_id": trace_id, key: dict(entry)})
    return path


# --- the run's plan ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TracePlan:
    """What one run does for one trace."""

    trace_id: str
    day: int
    ingest: bool
    analyse: bool
    fingerprint: dict[str, Any]
    analysed: dict[str, Any]                  # the ledger's "analysed" entry once the whole-trace stages succeed
    files: tuple[str, ...]
    duplicates: tuple[tuple[str, str], ...]
    args: dict[str, list[list[str]]]
    appends: bool = False                     # the ingest appends the newly landed files (else replaces the trace)


def plan_trace(settings: NightlySettings, landing: Landing, day: int, *, now: dt.datetime) -> TracePlan:
    args = stage_args(settings, landing, day, now=now)
    fingerprint = landing.fingerprint
    analysed = {"fingerprint": fingerprint, "args": {s: args[s] for s in WHOLE_TRACE_STAGES}}
    ledger = read_ledger(settings.warehouse, landing.manifest.trace_id)
    ingested = ledger.get("ingested", {}).get("fingerprint")
    done = {k: ledger.get("analysed", {}).get(k) for k in ("fingerprint", "args")}
    new = appended_files(ingested, landing)
    if new:
        args["ingest_trace"] = [["--append", "--allow-overlap", *args["ingest_trace"][0][:4], *new]]
    return TracePlan(landing.manifest.trace_id, day, ingest=ingested != fingerprint, analyse=done != analysed,
                     fingerprint=fingerprint, analysed=analysed, files=tuple(f.path for f in landing.files),
                     duplicates=landing.duplicates, args=args, appends=bool(new))


def appended_files(ingested: Mapping[str, Any] | None, landing: Landing) -> list[str]:
    """The landed files to append to the trace: those after the ingested ones, when the ingested fingerprint (format
    and SHA-256s) is the start of the landed one; [] when there is none or the trace must be ingested again whole."""
    if not isinstance(ingested, Mapping) or ingested.get("format") != landing.manifest.format:
        return []
    done = list(ingested.get("sha256") or [])
    landed = [f.sha256 for f in landing.files]
    if not done or landed[:len(done)] != done:
        return []
    return [f.path for f in landing.files[len(done):]]


def plan_run(settings: NightlySettings, interval_start: dt.date, *, now: dt.datetime,
             formats: Sequence[str]) -> list[TracePlan]:
    """One TracePlan per trace taking part in the run whose data interval starts on interval_start (folders
    in name order); LandingError for a bad folder, or a trace due today with no files landed."""
    if not settings.landing_dir.is_dir():
        raise LandingError(f"landing directory {settings.landing_dir} does not exist")
    plans = []
    digests = read_digests(settings.warehouse)
    for folder in sorted(p for p in settings.landing_dir.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        manifest = read_manifest(folder, formats)
        day = manifest.day(interval_start)
        if not manifest.takes_part(day):
            continue
        before = dict(digests)
        landing = scan_landing(folder, manifest, digests)
        if digests != before:
            write_digests(settings.warehouse, digests)        # before any error below: the hashing is kept
        if not landing.files:
            raise LandingError(f"landing folder {folder}: trace day {day} is due (start_date "
                               f"{manifest.start_date}) but no data file has landed")
        plans.append(plan_trace(settings, landing, day, now=now))
    return plans


def stage_kwargs(plans: Iterable[TracePlan], options: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Per stage, the SparkSubmitOperator expand_kwargs list: ingest for traces with new files, whole-trace
    stages for traces whose data or arguments changed, interval stages for every trace taking part."""
    out: dict[str, list[dict[str, Any]]] = {s: [] for s in STAGES}
    for plan in plans:
        for stage in STAGES:
            wanted = (plan.ingest if stage == "ingest_trace" else plan.analyse if stage in WHOLE_TRACE_STAGES
                      else True)
            if wanted:
                out[stage] += [{"application_args": a, "name": f"blockheat-{stage}-{plan.trace_id}", **options}
                               for a in plan.args[stage]]
    return out


# --- Delta tables, from their history (delta-rs) -----------------------------------------------------------


def _rows_written(info: Mapping[str, Any]) -> int:
    """The rows a commit wrote: numOutputRows of a blockheat replace's metrics, else of the commit's
    operationMetrics (Spark's writes: a string; delta-rs's own writes: num_added_rows); 0 when none."""
    recorded = info.get("blockheat.metrics")
    if isinstance(recorded, str):
        try:
            metrics = json.loads(recorded)
        except json.JSONDecodeError:
            metrics = None
        if isinstance(metrics, dict) and metrics.get("numOutputRows") is not None:
            return int(metrics["numOutputRows"])
    metrics = info.get("operationMetrics") or {}
    for key in ("numOutputRows", "num_added_rows"):
        if metrics.get(key) is not None:
            return int(metrics[key])
    return 0


def delta_commits(table: Location, after: int | None) -> list[dict[str, Any]]:
    """Commits of the table at `table` (a local path or a URI) after version `after` (all with None), oldest
    first, from its history (libs.io.delta_log): version, operation, rows_written (_rows_written; 0 for commits
    that write no rows). [] when there is no table."""
    from blockheat.libs.io import delta_log  # lazy: deltalake stays out of the DAG's parse

    root = storage.normalize(table)
    latest = delta_log.table_version(root)
    if latest is None or (after is not None and latest <= after):
        return []
    entries = delta_log.history(root, None if after is None else latest - after)
    out = [{"version": int(e["version"]), "operation": e.get("operation"), "rows_written": _rows_written(e)}
           for e in entries if after is None or int(e["version"]) > after]
    return sorted(out, key=lambda c: c["version"])


def table_versions(warehouse: Location, tables: Sequence[str] = TABLES) -> dict[str, int | None]:
    """Each table's latest Delta version (None: not created yet)."""
    from blockheat.libs.io.table_versions import table_version  # lazy: deltalake stays out of the DAG's parse

    return {t: table_version(warehouse, t) for t in tables}


def table_changes(warehouse: Location, before: Mapping[str, int | None]) -> dict[str, dict[str, int]]:
    """Per table that changed since `before` (table -> version): its version now, the commits and rows written."""
    from blockheat.libs.io.table_versions import table_path  # lazy: deltalake stays out of the DAG's parse

    out = {}
    for table, version in before.items():
        commits = delta_commits(table_path(warehouse, table), version)
        if commits:
            out[table] = {"version": commits[-1]["version"], "commits": len(commits),
                          "rows_written": sum(c["rows_written"] for c in commits)}
    return out
