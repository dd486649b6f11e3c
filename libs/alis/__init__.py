"""ALIS (automatic locality-improving storage): reorganization units, access graphs, run discovery,
heat clustering and the reorganized-area layout. Spark transforms plus numpy cores; no table reads or writes
here (libs/table_io and the jobs do them), only the graph's reduce tasks write their Parquet parts
(libs.io.task_parquet) instead of a checkpoint."""
