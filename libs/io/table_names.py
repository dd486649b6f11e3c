"""Which Delta tables a session gives a name in its catalog (libs.io.tables.ensure_table reads the setting,
libs.io.session sets it): every one it uses ("true", the default); none ("false": a session built with catalog
"none", whose jobs read tables by path); or only those it creates (NAMES_CREATED: a client of `blockheat serve`,
whose server's catalog has every other)."""
from __future__ import annotations

NAMES_CONF = "spark.blockheat.tableNames"
NAMES_CREATED = "created"

__all__ = ["NAMES_CONF", "NAMES_CREATED"]
