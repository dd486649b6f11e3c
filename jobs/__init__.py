"""Spark applications: one thin entry point per job (args -> config -> session -> libs -> tables)."""
