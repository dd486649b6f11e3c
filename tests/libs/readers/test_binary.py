"""vSCSI decoding without Spark: each rejected record gets its own reason and message."""
from __future__ import annotations

import struct

import pyarrow.compute as pc

from libs.readers.binary import ByteRange, VscsiFile, decode_vscsi


def test_messages_follow_their_records_when_a_check_rejects_many():
    cmds = [0x28, 0x00, 0x12, 0x2A, 0x1A, 0x28, 0x25]   # 0x00, 0x12, 0x1A, 0x25 carry no data
    data = b"".join(struct.pack("<IIIHHQQ", i, 4096, 1, c, 0x0100, i, i * 10) for i, c in enumerate(cmds))
    batch = decode_vscsi(data, ByteRange("x", "file:///x", 0, len(data)), 1, VscsiFile("vm", "x", 100),
                         tolerance_us=0)
    assert batch.column("reason").to_pylist() == [
        None, "non_data_command", "non_data_command", None, "non_data_command", None, "non_data_command"]
    assert pc.drop_null(batch.column("message")).to_pylist() == [
        f"SCSI opcode 0x{c:02x} carries no data" for c in (0x00, 0x12, 0x1A, 0x25)]
    assert batch.column("seq").to_pylist() == list(range(100, 107))


def test_binary_ranges_come_in_multiples_of_the_cores():
    from libs.ingest.pipeline import _balanced

    assert _balanced(400_000_000, 64 << 20, 2) == 66_666_667     # 6 ranges (not 5 of 64 MiB and a short one)
    assert _balanced(16 * 32, 4 * 32, 2) == 4 * 32                # 4 ranges already: unchanged
    assert _balanced(12 * 32, 4 * 32, 2) == 3 * 32                # 3 -> 4 ranges
    assert _balanced(10, 64 << 20, 4) == 3                        # tiny file: vscsi_ranges rounds up to a record
