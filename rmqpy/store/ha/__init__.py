"""Classic master/slave replication (Java ``store/ha``, facts §11).

The master listens on ``haListenPort`` (listenPort + 1); a slave connects, reports its commit
log's end as 8 bytes and receives the master's commit log from there in blocks with a 12-byte
header, which it appends verbatim and dispatches. The pieces take narrow callables, not the
store or the broker: :mod:`.connection` (the master's side of one slave), :mod:`.service`
(the listening side and what the slaves acknowledged), :mod:`.group_transfer` (SYNC_MASTER puts
waiting for a slave), :mod:`.client` (the slave's side).
"""
