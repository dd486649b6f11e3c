"""DataFrame -> DataFrame transforms (pure: no reads, no writes, no sessions)."""
