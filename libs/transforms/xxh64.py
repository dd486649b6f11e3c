"""XXH64's constants, the hash Spark's xxhash64 computes (org.apache.spark.sql.catalyst.expressions.XxHash64):
shared by heat_files' pure-Python hashing of the seed and device and heat_kernels' compiled hashing of each seq."""

MASK = (1 << 64) - 1
P1, P2, P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
P4, P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
