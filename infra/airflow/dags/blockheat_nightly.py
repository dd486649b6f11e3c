# The one line a DAG folder needs for blockheat's nightly Airflow DAG, from the installed package (dags/README.md).
from blockheat.dags.nightly_trace_analysis import dag  # noqa: F401
