"""The broker's requests to the controllers (Java ``BrokerOuterAPI``'s controller calls) and the
list of controller addresses (``ReplicasManager.updateControllerAddr``).

Every call goes through an injected ``invoke(addr, request, timeout)`` (the broker's
``RemotingClient.invoke``) and returns a Deferred of the typed answer. An answer whose code the
call does not take fails with :class:`ControllerError` (its code and remark), one that cannot be
read with :class:`~rmqpy.protocol.errors.HeaderError` / ``BodyError``: the replicas manager logs
either as one line and tries again later. Requests carry the version a 5.3.3 broker sends.
"""
from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from twisted.internet import defer

from rmqpy.protocol.bodies.controller import ElectMasterResponseBody, SyncStateSet
from rmqpy.protocol.codes import MQVersion, RequestCode, ResponseCode, code_name
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    GetMetaDataResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
)
from rmqpy.protocol.headers.namesrv import BrokerHeartbeatRequestHeader

TIMEOUT = 3.0  # Java: every controller call is invokeSync(..., 3000)


class Invoke(Protocol):
    def __call__(self, addr: str, request: RemotingCommand, timeout: float) -> defer.Deferred[RemotingCommand]: ...


class ControllerError(Exception):
    """The controller answered with a code the call does not take (Java ``MQBrokerException``)."""

    def __init__(self, code: int, remark: str | None, addr: str) -> None:
        super().__init__(f"{code_name(code, ResponseCode)} ({code}) from controller {addr}: {remark or ''}".rstrip(": "))
        self.code = code
        self.remark = remark


@dataclass(frozen=True)
class MasterInfo:
    """Who is master of the set and since which epoch, with the set's in-sync replicas: what
    registration, election, GET_REPLICA_INFO and NOTIFY_BROKER_ROLE_CHANGED all tell."""
    master_broker_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set: frozenset[int]
    sync_state_set_epoch: int

    @property
    def has_master(self) -> bool:
        return self.master_broker_id is not None and bool(self.master_address)


def controller_addresses(controller_addr: str, dns_lookup: bool,
                         resolve: Callable[[str], list[str]] | None = None) -> list[str]:
    """Java ``updateControllerAddr``: the ``;``-separated list, or with ``dns_lookup`` the one
    ``host:port`` resolved to every address of the host (``dnsLookupAddressByDomain``; an empty
    answer keeps nothing)."""
    if dns_lookup:
        host, sep, port = controller_addr.strip().partition(":")
        try:
            ips = (resolve or _resolve)(host)
        except OSError:
            return []
        return [f"{ip}{sep}{port}" for ip in ips]
    return [a.strip() for a in controller_addr.split(";") if a.strip()]


def _resolve(host: str) -> list[str]:
    seen: list[str] = []
    for info in socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM):
        ip = str(info[4][0])
        if ip not in seen:
            seen.append(ip)
    return seen


class ControllerClient:
    def __init__(self, invoke: Invoke, oneway: Callable[[str, RemotingCommand], Any],
                 now_ms: Callable[[], int]) -> None:
        self._invoke = invoke
        self._oneway = oneway
        self._now_ms = now_ms

    def _call(self, addr: str, code: int, header: Any, body: bytes | None = None,
              ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> defer.Deferred[RemotingCommand]:
        request = RemotingCommand.request(code, header, body, version=MQVersion.CURRENT)

        def check(response: RemotingCommand) -> RemotingCommand:
            if response.code not in ok:
                raise ControllerError(response.code, response.remark, addr)
            return response

        return self._invoke(addr, request, TIMEOUT).addCallback(check)

    def get_metadata(self, addr: str) -> defer.Deferred[GetMetaDataResponseHeader]:
        d = self._call(addr, RequestCode.CONTROLLER_GET_METADATA_INFO, None)
        return d.addCallback(lambda r: r.decode_header(GetMetaDataResponseHeader))

    def next_broker_id(self, leader: str, cluster: str, broker_name: str) -> defer.Deferred[int]:
        def read(r: RemotingCommand) -> int:
            answer = r.decode_header(GetNextBrokerIdResponseHeader)
            if answer.nextBrokerId is None:
                raise ControllerError(r.code, "GET_NEXT_BROKER_ID answered no nextBrokerId", leader)
            return answer.nextBrokerId

        return self._call(leader, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                          GetNextBrokerIdRequestHeader(cluster, broker_name)).addCallback(read)

    def apply_broker_id(self, leader: str, cluster: str, broker_name: str, broker_id: int,
                        check_code: str) -> defer.Deferred[None]:
        header = ApplyBrokerIdRequestHeader(cluster, broker_name, broker_id, check_code)
        return self._call(leader, RequestCode.CONTROLLER_APPLY_BROKER_ID, header).addCallback(lambda _: None)

    def register(self, leader: str, cluster: str, broker_name: str, broker_id: int,
                 broker_addr: str) -> defer.Deferred[MasterInfo]:
        header = RegisterBrokerToControllerRequestHeader(cluster, broker_name, broker_id, broker_addr, self._now_ms())

        def read(r: RemotingCommand) -> MasterInfo:
            h = r.decode_header(RegisterBrokerToControllerResponseHeader)
            sss = SyncStateSet.decode(r.body)
            return MasterInfo(h.masterBrokerId, h.masterAddress, h.masterEpoch or 0, sss.syncStateSet,
                              h.syncStateSetEpoch or 0)

        return self._call(leader, RequestCode.CONTROLLER_REGISTER_BROKER, header).addCallback(read)

    def replica_info(self, leader: str, broker_name: str) -> defer.Deferred[MasterInfo]:
        def read(r: RemotingCommand) -> MasterInfo:
            h = r.decode_header(GetReplicaInfoResponseHeader)
            sss = SyncStateSet.decode(r.body)
            return MasterInfo(h.masterBrokerId, h.masterAddress, h.masterEpoch or 0, sss.syncStateSet,
                              sss.syncStateSetEpoch)

        return self._call(leader, RequestCode.CONTROLLER_GET_REPLICA_INFO,
                          GetReplicaInfoRequestHeader(broker_name)).addCallback(read)

    def elect(self, leader: str, cluster: str, broker_name: str, broker_id: int) -> defer.Deferred[MasterInfo]:
        """Java ``brokerElect``: SUCCESS and CONTROLLER_MASTER_STILL_EXIST both name the master."""
        header = ElectMasterRequestHeader(cluster, broker_name, broker_id, False, self._now_ms())

        def read(r: RemotingCommand) -> MasterInfo:
            h = r.decode_header(ElectMasterResponseHeader)
            body = ElectMasterResponseBody.decode(r.body)
            return MasterInfo(h.masterBrokerId, h.masterAddress, h.masterEpoch or 0, body.syncStateSet,
                              h.syncStateSetEpoch or 0)

        return self._call(leader, RequestCode.CONTROLLER_ELECT_MASTER, header,
                          ok=(ResponseCode.SUCCESS, ResponseCode.CONTROLLER_MASTER_STILL_EXIST)).addCallback(read)

    def alter_sync_state_set(self, leader: str, broker_name: str, master_id: int, master_epoch: int,
                             new_set: frozenset[int], sync_state_set_epoch: int) -> defer.Deferred[SyncStateSet]:
        header = AlterSyncStateSetRequestHeader(broker_name, master_id, master_epoch, self._now_ms())
        body = SyncStateSet(new_set, sync_state_set_epoch).encode()
        d = self._call(leader, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, header, body)
        return d.addCallback(lambda r: SyncStateSet.decode(r.body))

    def heartbeat(self, addr: str, header: BrokerHeartbeatRequestHeader) -> Any:
        """BROKER_HEARTBEAT, oneway (Java ``sendHeartbeatToController``)."""
        request = RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, header, oneway=True,
                                          version=MQVersion.CURRENT)
        return self._oneway(addr, request)
