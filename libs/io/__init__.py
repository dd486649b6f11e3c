"""Spark and Delta I/O, on public APIs only. Imports run one way, top to bottom:

session (builds every SparkSession) > catalog (the Hive metastore) > tables (the tables' registry: create, read,
replace) > delta_files (task-written files, one driver commit) > delta_log (the log without Spark), task_parquet.
jvm (JVM flags, the class archive) sits on delta_files; inputs, partitioning, redaction, spark_daemon and worker import
nothing of the package. The per-device passes that read and write tables with these are libs/table_io.
"""
