"""ALIS heat clustering and the reorganized area (sections 5.1, 5.3, 6.2).

The reorganized area (RA) is ra_share of the storage used, starting ra_offset of the way into it.
Heat clustering copies the hottest units (by aged reference count) that fit and arranges them by a
layout: organ pipe, heat (descending heat), packed extents, or sequential (ascending home address,
the paper's recommendation). Run clustering lays the discovered runs out whole, in discovery
order; combined, runs are placed first and heat-clustered units fill the rest, so a unit may have
a copy in a run and another in the heat region.

Choices the paper leaves open: the hot units are the longest prefix of the heat order (ties: lower
unit id) that fits, and runs are placed in rank order up to the first that does not fit whole.

One device and plan at a time, over numpy arrays; libs.alis.layout plans every (device, interval) with Spark
from plan_area.
"""
from __future__ import annotations

import numpy as np

LAYOUTS = ("sequential", "packed", "heat", "organ-pipe")
MODES = ("heat", "run", "combined")


def check_plan(mode: str, layout: str, extent_bytes: int) -> None:
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: use one of {', '.join(MODES)}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r}: use one of {', '.join(LAYOUTS)}")
    if extent_bytes <= 0:
        raise ValueError(f"extent_bytes must be > 0, got {extent_bytes}")


def hot_units(heat: np.ndarray, sizes: np.ndarray, unit_ids: np.ndarray, capacity: int) -> np.ndarray:
    """Indices of the target units: the longest prefix of descending heat (ties: lower unit id)
    whose sizes add up to at most capacity bytes; units with no heat are never targets."""
    order = np.lexsort((unit_ids, -heat))
    order = order[heat[order] > 0]
    fits = np.cumsum(sizes[order]) <= capacity
    return order[: int(np.argmin(fits)) if not fits.all() else len(order)]


def arrange(offsets: np.ndarray, heat: np.ndarray, unit_ids: np.ndarray, *, layout: str,
            extent_bytes: int = 1 << 30) -> np.ndarray:
    """The order (indices) in which the given target units are laid out in the heat region.

    sequential: ascending home address. heat: descending heat. organ-pipe: hottest in the middle,
    the next ones alternately right and left of it. packed: extents of extent_bytes ranked by
    their units' heats in descending order compared element by element (highest first, then the
    next highest, ...), units by extent rank and then home address.
    """
    check_plan("heat", layout, extent_bytes)
    if layout == "sequential":
        return np.lexsort((unit_ids, offsets))
    by_heat = np.lexsort((unit_ids, offsets, -heat))
    if layout == "heat":
        return by_heat
    if layout == "organ-pipe":
        rank = np.arange(len(by_heat))
        side = np.where(rank % 2 == 1, (rank + 1) // 2, -(rank // 2))  # 0, 1, -1, 2, -2, ...
        return by_heat[np.argsort(side, kind="stable")]
    extent = offsets // extent_bytes
    vectors: dict[int, list[float]] = {}
    for i in by_heat:  # descending heat, so each extent's list comes out sorted
        vectors.setdefault(int(extent[i]), []).append(-float(heat[i]))
    # An extent without a next-highest unit ranks after one with any: heats are > 0, so the
    # sentinel 0.0 sorts after every negated heat.
    ranked = sorted(vectors, key=lambda e: ([*vectors[e], 0.0], e))
    extent_rank = {e: r for r, e in enumerate(ranked)}
    ranks = np.array([extent_rank[int(e)] for e in extent], np.int64)
    return np.lexsort((unit_ids, offsets, ranks))


def plan_area(runs: dict[str, np.ndarray], hot: dict[str, np.ndarray], *, ra_bytes: int, mode: str,
              layout: str, extent_bytes: int) -> dict[str, np.ndarray]:
    """Copies for one device's reorganized area, in RA order.

    runs: run_id, rank, position, unit_id, offset_bytes, size_bytes (one row per member).
    hot: unit_id, heat, offset_bytes, size_bytes (candidate units). Output: region, run_id (-1 for
    heat copies), unit_id, home_offset_bytes, size_bytes, ra_offset_bytes.
    """
    check_plan(mode, layout, extent_bytes)
    parts: list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    used = 0
    if mode in ("run", "combined") and len(runs["unit_id"]):
        order = np.lexsort((runs["position"], runs["rank"]))
        rank = runs["rank"][order]
        starts = np.flatnonzero(np.concatenate(([True], rank[1:] != rank[:-1])))
        run_bytes = np.add.reduceat(runs["size_bytes"][order], starts)
        fits = np.cumsum(run_bytes) <= ra_bytes
        placed_runs = int(np.argmin(fits)) if not fits.all() else len(starts)
        take = order[: (starts[placed_runs] if placed_runs < len(starts) else len(order))]
        used = int(runs["size_bytes"][take].sum())
        parts.append(("run", runs["run_id"][take], runs["unit_id"][take], runs["offset_bytes"][take],
                      runs["size_bytes"][take]))
    if mode in ("heat", "combined") and len(hot["unit_id"]):
        chosen = hot_units(hot["heat"], hot["size_bytes"], hot["unit_id"], ra_bytes - used)
        order = chosen[arrange(hot["offset_bytes"][chosen], hot["heat"][chosen], hot["unit_id"][chosen],
                               layout=layout, extent_bytes=extent_bytes)]
        parts.append(("heat", np.full(len(order), -1, np.int64), hot["unit_id"][order],
                      hot["offset_bytes"][order], hot["size_bytes"][order]))
    region = np.concatenate([np.full(len(p[2]), p[0], dtype=object) for p in parts]) if parts else np.zeros(0, object)
    size = np.concatenate([p[4] for p in parts]) if parts else np.zeros(0, np.int64)
    return {
        "region": region,
        "run_id": np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64),
        "unit_id": np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, np.int64),
        "home_offset_bytes": np.concatenate([p[3] for p in parts]) if parts else np.zeros(0, np.int64),
        "size_bytes": size,
        "ra_offset_bytes": np.concatenate(([0], np.cumsum(size)[:-1])).astype(np.int64) if len(size) else size,
    }
