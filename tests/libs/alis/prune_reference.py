"""A plain prune_arrays (np.unique and np.maximum.at every round): the reference the faster
sim.alis.graph.prune_arrays is checked against on random graphs: same edges kept, same rounds."""
from __future__ import annotations

import numpy as np

from blockheat.sim.alis.graph import EDGE_BYTES, PRUNE_SHARE, VERTEX_BYTES, _nearest_rank


def prune_arrays_reference(src: np.ndarray, dst: np.ndarray, weight: np.ndarray, budget: int, *,
                 share: float = PRUNE_SHARE) -> tuple[np.ndarray, int]:
    """The paper's bottom pruning of one graph until 19 V + 20 E <= budget bytes.

    Each round removes the edges whose weight is below the share-th percentile of the edge
    weights, and the vertices whose weight (their heaviest edge, in or out) is below the share-th
    percentile of the vertex weights, with those vertices' edges; both cuts are taken on the graph
    as the round finds it. When nothing lies below either percentile (the lightest weights are
    tied), the edges of the smallest weight go, all alike, so every round makes progress.
    Returns the indices of the edges kept and the number of rounds.
    """
    keep = np.arange(len(src))
    rounds = 0
    while len(keep):
        vocab, inverse = np.unique(np.concatenate([src[keep], dst[keep]]), return_inverse=True)
        if VERTEX_BYTES * len(vocab) + EDGE_BYTES * len(keep) <= budget:
            break
        w = weight[keep]
        s, d = inverse[: len(keep)], inverse[len(keep):]
        vertex_weight = np.full(len(vocab), -np.inf)
        np.maximum.at(vertex_weight, s, w)
        np.maximum.at(vertex_weight, d, w)
        edge_cut, vertex_cut = _nearest_rank(w, share), _nearest_rank(vertex_weight, share)
        dropped = vertex_weight < vertex_cut
        goes = (w < edge_cut) | dropped[s] | dropped[d]
        if edge_cut == w.min() and vertex_cut == vertex_weight.min():
            goes |= w <= edge_cut
        keep = keep[~goes]
        rounds += 1
    return keep, rounds
