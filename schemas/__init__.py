"""Table schemas of blockheat: Spark StructType, pyarrow schema and validator per table."""

# Modules (schemas.<name>) that each define one Delta table; libs.io.tables creates and registers them.
TABLE_MODULES: tuple[str, ...] = ("requests", "rejected_records", "traces",
    "extent_heat", "disk_heat", "aged_heat", "heat_tracking", "tracking_eval", "trace_profile",
    "reorg_units", "access_graph", "alis_runs", "alis_layout", "alis_summary", "alis_graphs",
    "sim_results", "sim_timeseries", "striping_recommendations", "cooling_moves",
    "policy_scores", "reorg_plans", "reorg_plan_steps")
