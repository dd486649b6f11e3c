"""DataFrame -> DataFrame transforms (pure: no reads, no writes, no sessions) and the compiled kernels their
per-device forms run (libs/table_io reads the files and writes the tables; a contract in pyproject.toml keeps
table I/O out of this package)."""
