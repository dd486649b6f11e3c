"""Builders for the ALIS tests: reference strings as `unit_refs` rows, graphs, and a plain-Python
access-graph reference independent of the Spark build."""
from __future__ import annotations

from collections import defaultdict
from typing import Any

REF_DDL = "device string, interval_id long, ts_us long, seq long, sub int, op string, unit_id long"
GRAPH_DDL = "device string, interval_id long, src_unit long, dst_unit long, weight double"
NAMES = "ARUNBXCDEFGHIJKLMOPQSTVWYZ"


def units_of(text: str) -> list[int]:
    """'R, U, N' -> unit ids by letter (A=0, R=1, U=2, N=3, B=4, X=5, ...)."""
    return [NAMES.index(c) for c in text.replace(",", "").split()]


def name(unit: int) -> str:
    return NAMES[unit]


def make_refs(spark: Any, rows: list[tuple[str, int, int, int]]) -> Any:
    """Read references from (device, interval_id, ts_us, unit_id); seq follows the list order."""
    return spark.createDataFrame([(d, i, ts, seq, 0, "R", u) for seq, (d, i, ts, u) in enumerate(rows)], REF_DDL)


def string_refs(spark: Any, text: str, *, device: str = "d", interval_id: int = 0, step_us: int = 1000) -> Any:
    return make_refs(spark, [(device, interval_id, k * step_us, u) for k, u in enumerate(units_of(text))])


def make_graph(spark: Any, edges: list[tuple[str, int, int, int, float]]) -> Any:
    return spark.createDataFrame([(d, i, s, t, float(w)) for d, i, s, t, w in edges], GRAPH_DDL)


def reference_counts(rows: list[tuple[str, int, int, int]], tau: int) -> dict[tuple[Any, ...], tuple[int, int]]:
    """(device, interval, src, dst) -> (pairs, closeness) by the definition, one read at a time."""
    strings: dict[tuple[str, int], list[tuple[int, int, int]]] = defaultdict(list)
    for seq, (d, i, ts, u) in enumerate(rows):
        strings[(d, i)].append((ts, seq, u))
    out: dict[tuple[Any, ...], list[int]] = defaultdict(lambda: [0, 0])
    for (d, i), refs in strings.items():
        units = [u for _, _, u in sorted(refs)]
        for n in range(len(units)):
            for j in range(1, tau + 1):
                if n - j >= 0 and units[n - j] != units[n]:
                    acc = out[(d, i, units[n - j], units[n])]
                    acc[0] += 1
                    acc[1] += tau - j + 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def counts_of(df: Any) -> dict[tuple[Any, ...], tuple[int, int]]:
    return {(r.device, r.interval_id, r.src_unit, r.dst_unit): (r.pairs, r.closeness) for r in df.collect()}


def weights_of(df: Any, *, named: bool = True) -> dict[Any, float]:
    """{'RU': 2.0, ...} for a one-group graph (or {(device, interval, src, dst): w})."""
    rows = df.collect()
    if named:
        return {name(r.src_unit) + name(r.dst_unit): r.weight for r in rows}
    return {(r.device, r.interval_id, r.src_unit, r.dst_unit): r.weight for r in rows}
