"""The bytes of AutoSwitch HA (Java ``AutoSwitchHAClient``/``AutoSwitchHAConnection``, 5.3.3;
unchanged in 5.5.1). All big-endian (Java ``ByteBuffer``). Each frame starts with the sender's
state, the ordinal of Java's ``HAConnectionState`` (:class:`State`); a receiver in another
state drops the connection.

Replica to master:

* handshake, 16 bytes: ``int32 state (HANDSHAKE) | int16 isSyncFromLastFile | int16
  isAsyncLearner | int64 slave broker id`` (:data:`SLAVE_HANDSHAKE`);
* offset report, 12 bytes: ``int32 state (TRANSFER) | int64 the replica's max offset``
  (:data:`SLAVE_REPORT`).

Master to replica:

* handshake answer: ``int32 state (HANDSHAKE) | int32 body size | int64 the master's max offset |
  int32 its last epoch`` (20 bytes, :data:`MASTER_HANDSHAKE`), then per epoch entry ``int32
  epoch | int64 start offset`` (12 bytes, :data:`EPOCH_ENTRY`);
* transfer: ``int32 state (TRANSFER) | int32 body size | int64 offset of the body | int32
  epoch | int64 the epoch's start offset | int64 confirm offset`` (36 bytes,
  :data:`MASTER_TRANSFER`), then the body, commit log bytes; a body size of 0 is a heartbeat.
"""
from __future__ import annotations

import enum
import struct


class State(enum.IntEnum):
    """Java ``HAConnectionState``; frames carry its ordinal."""
    READY = 0
    HANDSHAKE = 1
    TRANSFER = 2
    SUSPEND = 3
    SHUTDOWN = 4


SLAVE_HANDSHAKE = struct.Struct(">ihhq")
SLAVE_REPORT = struct.Struct(">iq")
MASTER_HANDSHAKE = struct.Struct(">iiqi")
EPOCH_ENTRY = struct.Struct(">iq")
MASTER_TRANSFER = struct.Struct(">iiqiqq")
#: the largest body a replica accepts in one frame (Java's AutoSwitchHAClient reads into a
#: 4 MiB buffer; masters send at most haTransferBatchSize, 32 KiB by default)
MAX_BODY = 4 * 1024 * 1024
#: the most epoch entries a master sends (Java's handshake buffer holds 1000)
MAX_EPOCH_ENTRIES = 1000

assert (SLAVE_HANDSHAKE.size, SLAVE_REPORT.size, MASTER_HANDSHAKE.size, EPOCH_ENTRY.size,
        MASTER_TRANSFER.size) == (16, 12, 20, 12, 36)
