"""`striping_recommendations`: per trace and advice run, each method's striping unit, width and
predicted response time, globally (file "*") and per file (traced device or address region), with the
simulator's exhaustive best (method "gbest") and each global method's distance from it.

Methods: five (FIVE's P_eff = min(P_opt, P-bar), Figure 2), five_phase_a (P_opt alone, light load),
five_global (file rows: the global unit with the file's width), eq1 (FIVE's equation 1 = Lee and Katz),
mpl_slope (Chen and Patterson's rule), gbest. See libs/plans/striping_advisor.py."""
from __future__ import annotations

from typing import TYPE_CHECKING

from blockheat.schemas._check import check, flat_schema, spark_schema_attr

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

TABLE = "striping_recommendations"
PARTITION_COLUMNS = ("trace_id",)
KEY_COLUMNS = ("trace_id", "advice_id")
FIELDS = (
    ("trace_id", "string", False),
    ("advice_id", "string", False),              # one advice run: spec, disks and inputs (default spec x disks)
    ("spec", "string", False),                   # the disk spec's name
    ("n_disks", "long", False),                  # D
    ("block_bytes", "long", False),              # the spec's block (sector) size
    ("rate_per_s", "double", True),              # lambda-bar (after speed-up); NULL: Phase A only
    ("mpl", "double", False),                    # multiprogramming level used by eq1 and mpl_slope
    ("scope", "string", False),                  # "global", "device" or "region"
    ("file", "string", False),                   # "*", a device, or "device:start_bytes"
    ("method", "string", False),
    ("mean_request_bytes", "double", False),     # R-bar or R_i
    ("file_bytes", "double", False),             # L-bar or L_i
    ("parallelism", "double", False),            # the P the unit comes from (rules: the unit's P)
    ("phase_a_p", "long", True),                 # P_opt (Phase A)
    ("phase_b_p", "long", True),                 # P-bar (Phase B)
    ("striping_unit_blocks", "long", False),
    ("striping_unit_bytes", "long", False),
    ("width", "long", False),                    # SW = min(D, ceil(L / SU))
    ("aligned", "boolean", False),               # requests taken to start at run boundaries
    ("predicted_response_ms", "double", True),   # +inf when a disk saturates
    ("prediction", "string", False),             # "eq25" (queueing) or "eq16" (service time alone)
    ("simulated_response_ms", "double", True),   # global rows with a Gbest sweep; +inf when saturated
    ("gbest_unit_bytes", "long", True),
    ("distance_from_gbest", "double", True),     # simulated response / Gbest's - 1
)
COLUMNS = tuple(name for name, _, _ in FIELDS)
ARROW_SCHEMA = flat_schema(FIELDS)


class StripingRecommendationsSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `striping_recommendations` table."""


def validate_striping_recommendations(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise StripingRecommendationsSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, StripingRecommendationsSchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
