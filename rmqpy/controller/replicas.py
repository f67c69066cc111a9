"""What the leader answers each controller request, and which events it logs for it (Java
``ReplicasInfoManager``'s request methods, check for check in Java's order).

Each function reads a :class:`~rmqpy.controller.state.ReplicasState` and the leader's view of
liveness and returns a :class:`Result`: the answer's code, remark, header and body, and the events
to append to the replicated log. Nothing here changes the state: the events do, once committed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmqpy.controller.elect import DefaultElectPolicy, ValidPredicate
from rmqpy.controller.state import (
    FIRST_BROKER_CONTROLLER_ID,
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CleanBrokerDataEvent,
    ElectMasterEvent,
    Event,
    ReplicasState,
    UpdateBrokerAddressEvent,
)
from rmqpy.protocol.bodies.controller import (
    BrokerMemberGroup,
    BrokerReplicasInfo,
    ElectMasterResponseBody,
    ReplicaIdentity,
    ReplicasInfo,
    SyncStateSet,
)
from rmqpy.protocol.codes import ResponseCode
from rmqpy.protocol.headers.controller import (
    AlterSyncStateSetResponseHeader,
    ApplyBrokerIdResponseHeader,
    ElectMasterResponseHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerResponseHeader,
)


@dataclass
class Result:
    """Java ``ControllerResult``."""
    header: Any = None
    code: int = ResponseCode.SUCCESS
    remark: str | None = None
    body: bytes | None = None
    events: list[Event] = field(default_factory=list)

    def fail(self, code: int, remark: str) -> Result:
        self.code, self.remark = code, remark
        return self


def alter_sync_state_set(state: ReplicasState, broker_name: str, master_id: int | None, master_epoch: int | None,
                         new: SyncStateSet, alive: ValidPredicate) -> Result:
    result = Result(AlterSyncStateSetResponseHeader())
    if not state.contains(broker_name):
        return result.fail(ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "Broker metadata is not existed")
    info, replica = state.sync_state[broker_name], state.replica_info[broker_name]
    new_set = new.syncStateSet
    if new_set == info.syncStateSet:
        return result.fail(ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                           "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet")
    if info.masterBrokerId is None or info.masterBrokerId != master_id:
        return result.fail(ResponseCode.CONTROLLER_INVALID_MASTER,
                           f"Rejecting alter syncStateSet request because the current leader is:"
                           f"{{{_java(info.masterBrokerId)}}}, not {{{_java(master_id)}}}")
    if master_epoch != info.masterEpoch:
        return result.fail(ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
                           f"Rejecting alter syncStateSet request because the current master epoch is:"
                           f"{{{info.masterEpoch}}}, not {{{_java(master_epoch)}}}")
    if new.syncStateSetEpoch != info.syncStateSetEpoch:
        return result.fail(ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                           f"Rejecting alter syncStateSet request because the current syncStateSet epoch is:"
                           f"{{{info.syncStateSetEpoch}}}, not {{{new.syncStateSetEpoch}}}")
    for broker_id in sorted(new_set):
        if broker_id not in replica.brokers:
            return result.fail(ResponseCode.CONTROLLER_INVALID_REPLICAS,
                               f"Rejecting alter syncStateSet request because the replicas {{{broker_id}}} don't exist")
        if not alive(replica.clusterName, replica.brokerName, broker_id):
            return result.fail(ResponseCode.CONTROLLER_BROKER_NOT_ALIVE,
                               f"Rejecting alter syncStateSet request because the replicas {{{broker_id}}} don't alive")
    if info.masterBrokerId not in new_set:
        return result.fail(ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                           f"Rejecting alter syncStateSet request because the newSyncStateSet don't contains "
                           f"origin leader {{{info.masterBrokerId}}}")
    epoch = info.syncStateSetEpoch + 1
    result.header.newSyncStateSetEpoch = epoch
    result.body = SyncStateSet(new_set, epoch).encode()
    result.events.append(AlterSyncStateSetEvent(broker_name, tuple(sorted(new_set))))
    return result


def elect_master(state: ReplicasState, broker_name: str, broker_id: int | None, designate_elect: bool,
                 policy: DefaultElectPolicy, elect_unclean: bool) -> Result:
    """``broker_id`` None or -1: the controller's own election (its master died)."""
    result = Result(ElectMasterResponseHeader())
    if not state.contains(broker_name):
        return result.fail(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered")
    info, replica = state.sync_state[broker_name], state.replica_info[broker_name]
    old_master = info.masterBrokerId
    all_replicas = set(replica.brokers) if elect_unclean else None
    new_master: int | None = None
    if info.first_time_for_elect and broker_id in replica.brokers:
        # Java takes any brokerId here, even one the set never registered (a master with no
        # address); rmqpy takes the asking broker only if it is a replica of the set, otherwise
        # the policy decides, as for any later election
        new_master = broker_id
    if new_master is None or new_master == -1:
        assigned = broker_id if designate_elect else None
        new_master = policy.elect(replica.clusterName, replica.brokerName, info.syncStateSet, all_replicas,
                                  old_master, assigned)
    header = result.header
    if new_master is not None and new_master == old_master:
        header.masterEpoch = info.masterEpoch
        header.syncStateSetEpoch = info.syncStateSetEpoch
        header.masterBrokerId = old_master
        header.masterAddress = replica.address(old_master)
        result.body = ElectMasterResponseBody(info.syncStateSet).encode()
        return result.fail(ResponseCode.CONTROLLER_MASTER_STILL_EXIST,
                           f"The old master {old_master} is still alive, not need to elect new master for broker "
                           f"{replica.brokerName}")
    if new_master is not None:
        header.masterBrokerId = new_master
        header.masterAddress = replica.address(new_master)
        header.masterEpoch = info.masterEpoch + 1
        header.syncStateSetEpoch = info.syncStateSetEpoch + 1
        group = BrokerMemberGroup(replica.clusterName, replica.brokerName, replica.id_table())
        result.body = ElectMasterResponseBody(frozenset((new_master,)), group).encode()
        result.events.append(ElectMasterEvent(broker_name, True, new_master))
        return result
    if broker_id is None or broker_id == -1:
        result.events.append(ElectMasterEvent(broker_name, False, None))
        return result.fail(ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
                           "Old master has down and failed to elect a new broker master")
    return result.fail(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, "Failed to elect a new master")


def next_broker_id(state: ReplicasState, cluster: str | None, broker_name: str) -> Result:
    replica = state.replica_info.get(broker_name)
    next_id = FIRST_BROKER_CONTROLLER_ID if replica is None else replica.nextAssignBrokerId
    return Result(GetNextBrokerIdResponseHeader(cluster, broker_name, next_id))


def apply_broker_id(state: ReplicasState, cluster: str | None, broker_name: str, broker_id: int | None,
                    check_code: str) -> Result:
    address = check_code.split(";")[0]
    replica = state.replica_info.get(broker_name)
    result = Result(ApplyBrokerIdResponseHeader(cluster, broker_name))
    event = ApplyBrokerIdEvent(cluster or "", broker_name, address, broker_id if broker_id is not None else -1,
                               check_code)
    if replica is None:
        if broker_id == FIRST_BROKER_CONTROLLER_ID:
            result.events.append(event)
            return result
        return result.fail(ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                           f"Broker-set: {broker_name} hasn't been registered in controller, but broker try to "
                           f"apply brokerId: {_java(broker_id)}")
    if broker_id not in replica.brokers or check_code == replica.check_code(broker_id):
        result.events.append(event)
        return result
    return result.fail(ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                       f"Fail to apply brokerId: {_java(broker_id)} in broker-set: {broker_name}")


def register_broker(state: ReplicasState, cluster: str, broker_name: str, broker_id: int | None,
                    address: str, alive: ValidPredicate) -> Result:
    result = Result(RegisterBrokerToControllerResponseHeader(cluster, broker_name))
    if not state.contains(broker_name):
        return result.fail(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                           f"Broker-set: {broker_name} hasn't been registered in controller")
    replica, info = state.replica_info[broker_name], state.sync_state[broker_name]
    if broker_id not in replica.brokers:
        return result.fail(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                           f"BrokerId: {_java(broker_id)} hasn't been registered in broker-set: {broker_name}")
    if info.masterBrokerId is not None and alive(cluster, broker_name, info.masterBrokerId):
        result.header.masterBrokerId = info.masterBrokerId
        result.header.masterAddress = replica.address(info.masterBrokerId)
        result.header.masterEpoch = info.masterEpoch
        result.header.syncStateSetEpoch = info.syncStateSetEpoch
    result.body = SyncStateSet(info.syncStateSet, info.syncStateSetEpoch).encode()
    if address != replica.address(broker_id):
        assert broker_id is not None
        result.events.append(UpdateBrokerAddressEvent(cluster, broker_name, address, broker_id))
    return result


def replica_info(state: ReplicasState, broker_name: str) -> Result:
    result = Result(GetReplicaInfoResponseHeader())
    if not state.contains(broker_name):
        return result.fail(ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed")
    info, replica = state.sync_state[broker_name], state.replica_info[broker_name]
    result.header.masterBrokerId = info.masterBrokerId
    result.header.masterAddress = replica.address(info.masterBrokerId)
    result.header.masterEpoch = info.masterEpoch
    result.body = SyncStateSet(info.syncStateSet, info.syncStateSetEpoch).encode()
    return result


def sync_state_data(state: ReplicasState, broker_names: list[str], alive: ValidPredicate) -> Result:
    table: dict[str, ReplicasInfo] = {}
    for name in broker_names:
        if not state.contains(name):
            continue
        info, replica = state.sync_state[name], state.replica_info[name]
        in_sync: list[ReplicaIdentity] = []
        not_in_sync: list[ReplicaIdentity] = []
        for broker_id, address in sorted(replica.id_table().items()):
            identity = ReplicaIdentity(name, broker_id, address, alive(replica.clusterName, name, broker_id))
            (in_sync if broker_id in info.syncStateSet else not_in_sync).append(identity)
        table[name] = ReplicasInfo(info.masterBrokerId, replica.address(info.masterBrokerId), info.masterEpoch,
                                   info.syncStateSetEpoch, in_sync, not_in_sync)
    return Result(body=BrokerReplicasInfo(table).encode())


def clean_broker_data(state: ReplicasState, cluster: str | None, broker_name: str, ids_to_clean: str | None,
                      clean_living: bool, alive: ValidPredicate) -> Result:
    result = Result()
    id_set: tuple[int, ...] = ()
    if not clean_living:
        info = state.sync_state.get(broker_name)
        if not (ids_to_clean or "").strip() and info is not None and info.masterBrokerId is not None:
            return result.fail(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                               f"Broker {broker_name} is still alive, clean up failure")
        if (ids_to_clean or "").strip():
            try:
                id_set = tuple(sorted({int(i) for i in ids_to_clean.split(";")}))  # type: ignore[union-attr]
            except ValueError as exc:
                return result.fail(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                   f"Please set the option <brokerControllerIdsToClean> according to the format, "
                                   f"exception: {exc}")
            for broker_id in id_set:
                if alive(cluster or "", broker_name, broker_id):
                    return result.fail(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                       f"Broker [{broker_name},  {broker_id}] is still alive, clean up failure")
    if state.contains(broker_name):
        result.events.append(CleanBrokerDataEvent(broker_name, id_set))
        return result
    return result.fail(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                       f"Broker {broker_name} is not existed,clean broker data failure.")


def need_reelect(state: ReplicasState, alive: ValidPredicate) -> list[str]:
    """Java ``scanNeedReelectBrokerSets``: sets whose master is dead and a replica alive."""
    names = []
    for name, info in state.sync_state.items():
        master = info.masterBrokerId
        if master is not None and not alive(info.clusterName, name, master):
            replica = state.replica_info.get(name)
            if replica is not None and any(alive(info.clusterName, name, i) for i in replica.brokers):
                names.append(name)
    return names


def _java(value: Any) -> str:
    """A value as Java's String.format writes it (null for None)."""
    return "null" if value is None else str(value)
