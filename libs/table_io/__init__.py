"""The analyses' table I/O, on libs/io's Delta layer: the per-device passes over a trace's files (device_pass: one
Spark task per device over its own files, each output committed once) that read the `requests` (or a stored
graph's) files and write their tables, with the Spark SQL forms of libs/transforms and libs/alis as their fallback
when the files cannot be read directly (heat: extent and disk heat, aged counts; tracking; profile; report: the
report's per-device distributions; ALIS's graph build, stored runs and layout), and the plans' store (plans:
store, load, check, export). The transforms, ALIS and plans packages read and write no tables themselves."""
