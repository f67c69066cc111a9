"""Message sysflag bits (facts §6.2).  These are the *message* sysflag values
stored in the commit log record, not the pull-request or topic sysflags."""

COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_MASK = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80

COMPRESSION_TYPE_MASK = 0x700
COMPRESSION_LZ4 = 0x100
COMPRESSION_ZSTD = 0x200
COMPRESSION_ZLIB = 0x300


def transaction_value(sys_flag: int) -> int:
    """The transaction type bits (one of the TRANSACTION_*_TYPE values)."""
    return sys_flag & TRANSACTION_MASK


def reset_transaction_value(sys_flag: int, tran_type: int) -> int:
    return (sys_flag & ~TRANSACTION_MASK) | tran_type


def clear_compressed(sys_flag: int) -> int:
    return sys_flag & ~COMPRESSED_FLAG


def compression_type(sys_flag: int) -> str | None:
    """Name of the body compression ('ZLIB', 'LZ4', 'ZSTD') or None."""
    if not sys_flag & COMPRESSED_FLAG:
        return None
    bits = sys_flag & COMPRESSION_TYPE_MASK
    if bits == COMPRESSION_LZ4:
        return "LZ4"
    if bits == COMPRESSION_ZSTD:
        return "ZSTD"
    return "ZLIB"  # 0x300 or 0 (old clients)
