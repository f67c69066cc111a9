"""The bytes of classic HA: a slave's report is one big-endian int64 (its commit log's end), a
master's block is ``int64 start offset | int32 size | size bytes`` of its commit log."""
from __future__ import annotations

import struct

REPORT = struct.Struct(">q")
HEADER = struct.Struct(">qi")
#: the largest block a slave accepts (Java's HAClient reads into a 4 MiB buffer; masters send
#: at most haTransferBatchSize, 32 KiB by default)
MAX_BLOCK = 4 * 1024 * 1024
