"""ALIS (automatic locality-improving storage): reorganization units, access graphs, run discovery,
heat clustering and the reorganized-area layout. Spark transforms plus numpy cores; no I/O here."""
