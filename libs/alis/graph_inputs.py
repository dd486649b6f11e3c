"""What the ALIS graph and layout jobs share about a trace's graphs: the parameters the stored graphs were
built with (alis_graphs) and the unit references a graph is built from."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from blockheat.libs.alis.graph import prefilter_refs
from blockheat.libs.io.tables import read_table, table_exists
from blockheat.schemas import alis_graphs

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def graph_params(spark: SparkSession, warehouse: Any, trace_id: str) -> dict[str, Any]:
    """The stored alis_graphs row of a trace; a clear error when the graphs were not built."""
    rows = []
    if table_exists(warehouse, alis_graphs.TABLE):
        rows = read_table(spark, warehouse, alis_graphs.TABLE, trace_id).collect()
    if not rows:
        raise LookupError(f"no ALIS graphs for trace {trace_id!r} (run: blockheat graph {trace_id})")
    return rows[0].asDict()


def graph_refs(refs: DataFrame, *, include_writes: bool, prefilter_min_refs: int) -> DataFrame:
    """The references that build the graph: reads (and writes if asked), optionally pre-filtered."""
    chosen = refs if include_writes else refs.where(F.col("op") == "R")
    return prefilter_refs(chosen, min_refs=prefilter_min_refs)
