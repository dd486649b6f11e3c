"""Table schemas of blockheat: Spark StructType, pyarrow schema and validator per table."""
