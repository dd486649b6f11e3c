"""`rejected_records`: every source record that did not become a request, with the reason."""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from blockheat.schemas._check import check, spark_schema_attr

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TABLE = "rejected_records"
PARTITION_COLUMNS = ("trace_id",)
STATS_COLUMNS = ("position",)  # Delta data-skipping statistics
COLUMNS = ("trace_id", "source_file", "position", "position_kind", "reason", "message", "raw")

# Reasons that describe records which are not requests by design (blkparse's non-issue events,
# blank lines); they are kept here so nothing is lost but do not count towards the reject share.
INFORMATIONAL_REASONS = frozenset({
    "blank_line", "comment_line", "header_line", "summary_line", "ignored_event", "completion_event",
    "no_data", "non_data_command",
})


ARROW_SCHEMA = pa.schema([
    pa.field("trace_id", pa.string(), False),
    pa.field("source_file", pa.string(), False),
    pa.field("position", pa.int64(), False),
    pa.field("position_kind", pa.string(), False),
    pa.field("reason", pa.string(), False),
    pa.field("message", pa.string(), False),
    pa.field("raw", pa.string(), False),
])


class RejectedRecordsSchemaError(ValueError):
    """A DataFrame or Arrow schema does not match the `rejected_records` table."""


def validate_rejected_records(df_or_schema: DataFrame | pa.Schema) -> None:
    """Raise RejectedRecordsSchemaError naming missing, extra or mistyped columns."""
    check(df_or_schema, ARROW_SCHEMA, RejectedRecordsSchemaError, TABLE)


#: SPARK_SCHEMA, the Spark schema derived from ARROW_SCHEMA on first use (importing this module loads no pyspark).
__getattr__ = spark_schema_attr(__name__)
