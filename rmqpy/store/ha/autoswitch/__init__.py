"""AutoSwitch HA: replication of controller mode (Java ``store/ha/autoswitch``, RIP-44).

In controller mode the controller elects a broker set's master and numbers each term with an
epoch; brokers switch role at run time. The replication protocol on ``haListenPort`` differs
from classic HA (:mod:`rmqpy.store.ha`): a replica first shakes hands with its state and
broker id, the master answers with its epoch list (:mod:`rmqpy.store.epoch`), the replica cuts
its log where both lists agree, and the master's transfer frames carry the epoch of their data
and the confirm offset. :mod:`.wire` has the bytes, :mod:`.connection` the master's side of one
replica, :mod:`.client` the replica's side, :mod:`.service` what the broker drives (the role,
the in-sync replica set, the confirm offset), typed in :mod:`.api`.
"""
