"""blockheat's Airflow DAGs, installed with the package: a DAG folder imports them by name (dags/README.md)."""
