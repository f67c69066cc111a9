"""A controller in memory, answering a broker's requests as Apache's 5.3.3 controller does for one
broker set (``ReplicasInfoManager``: ids from 1, the first election names the asker, each election
raises the master epoch and the SyncStateSet epoch); every request it gets is kept."""
from __future__ import annotations

from typing import Any

from twisted.internet import defer

from rmqpy.protocol.bodies.controller import SyncStateSet
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.fastjson import dumps
from rmqpy.protocol.headers.controller import (
    ElectMasterResponseHeader,
    GetMetaDataResponseHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerResponseHeader,
)
from rmqpy.protocol.headers.namesrv import RegisterBrokerResponseHeader


class FakeController:
    def __init__(self, leader: str, peers: list[str], down: tuple[str, ...] = ()) -> None:
        self.leader = leader
        self.peers = peers
        self.down = set(down)
        self.requests: list[tuple[str, RemotingCommand]] = []
        self.addresses: dict[int, str] = {}  # broker id -> address
        self.check_codes: dict[int, str] = {}
        self.master: int | None = None
        self.master_epoch = 0
        self.sync_state_set: frozenset[int] = frozenset()
        self.sync_state_set_epoch = 0
        self.override: dict[int, RemotingCommand] = {}  # an answer to send instead, by request code
        self.name_server: dict[str, dict[int, str]] = {}  # broker name -> brokerId -> address, as registered
        self.ha_server_addrs: dict[str, str] = {}  # broker address -> its haServerAddr, as registered

    def elected(self, broker_id: int, address: str, epoch: int, sync_state_set_epoch: int | None = None,
                sync_state_set: frozenset[int] | None = None) -> None:
        """The state after an election the controller held on its own (the master died), before it
        notifies the set's brokers."""
        self.addresses[broker_id] = address
        self.master, self.master_epoch = broker_id, epoch
        self.sync_state_set = sync_state_set if sync_state_set is not None else frozenset({broker_id})
        self.sync_state_set_epoch = sync_state_set_epoch if sync_state_set_epoch is not None else epoch

    # -- what the broker's RemotingClient offers
    def connection(self, addr: str) -> defer.Deferred[Any]:
        return defer.fail(ConnectionRefusedError(addr)) if addr in self.down else defer.succeed(object())

    def invoke_oneway(self, addr: str, request: RemotingCommand) -> defer.Deferred[None]:
        self.requests.append((addr, request))
        return defer.succeed(None)

    def invoke(self, addr: str, request: RemotingCommand, timeout: float = 3.0) -> defer.Deferred[RemotingCommand]:
        if addr in self.down:
            return defer.fail(ConnectionRefusedError(addr))
        self.requests.append((addr, request))
        if request.code in self.override:
            answer = self.override[request.code]
            answer.opaque = request.opaque
            return defer.succeed(answer)
        return defer.succeed(self._answer(addr, request))

    def close(self) -> None:
        pass

    def codes(self) -> list[int]:
        return [r.code for _a, r in self.requests]

    def of(self, code: int) -> list[RemotingCommand]:
        return [r for _a, r in self.requests if r.code == code]

    # -- Apache's controller, for one broker set
    def _answer(self, addr: str, r: RemotingCommand) -> RemotingCommand:
        ext = r.ext_fields or {}
        if r.code == RequestCode.REGISTER_BROKER:  # a name server's part: a slave learns its master's address
            broker_id = int(ext["brokerId"])
            self.name_server.setdefault(ext["brokerName"], {})[broker_id] = ext["brokerAddr"]
            self.ha_server_addrs[ext["brokerAddr"]] = ext.get("haServerAddr", "")
            master = self.name_server[ext["brokerName"]].get(0) if broker_id != 0 else None
            ha = self.ha_server_addrs.get(master) if master else None  # Java: the master's live info
            return r.response(header=RegisterBrokerResponseHeader(haServerAddr=ha, masterAddr=master))
        if r.code == RequestCode.UNREGISTER_BROKER:
            return r.response()
        if r.code == RequestCode.CONTROLLER_GET_METADATA_INFO:
            return r.response(header=GetMetaDataResponseHeader("group", "n0", self.leader, addr == self.leader,
                                                               ";".join(self.peers)))
        if addr != self.leader:
            return r.response(ResponseCode.CONTROLLER_NOT_LEADER, "The controller is not in leader state")
        if r.code == RequestCode.CONTROLLER_GET_NEXT_BROKER_ID:
            return r.response(header=GetNextBrokerIdResponseHeader(ext["clusterName"], ext["brokerName"],
                                                                   max(self.addresses, default=0) + 1))
        if r.code == RequestCode.CONTROLLER_APPLY_BROKER_ID:
            broker_id = int(ext["appliedBrokerId"])
            if broker_id in self.addresses and self.check_codes[broker_id] != ext["registerCheckCode"]:
                return r.response(ResponseCode.CONTROLLER_BROKER_ID_INVALID, "taken")
            self.addresses[broker_id] = ext["registerCheckCode"].split(";")[0]
            self.check_codes[broker_id] = ext["registerCheckCode"]
            return r.response()
        if r.code == RequestCode.CONTROLLER_REGISTER_BROKER:
            broker_id = int(ext["brokerId"])
            if broker_id not in self.addresses:
                return r.response(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "not registered")
            self.addresses[broker_id] = ext["brokerAddress"]
            h = RegisterBrokerToControllerResponseHeader(ext["clusterName"], ext["brokerName"])
            if self.master is not None:
                h.masterBrokerId, h.masterAddress = self.master, self.addresses[self.master]
                h.masterEpoch, h.syncStateSetEpoch = self.master_epoch, self.sync_state_set_epoch
            return r.response(header=h, body=self._sss())
        if r.code == RequestCode.CONTROLLER_ELECT_MASTER:
            broker_id = int(ext["brokerId"])
            if self.master is not None:
                return r.response(ResponseCode.CONTROLLER_MASTER_STILL_EXIST, "still",
                                  header=self._elect_header(), body=self._elect_body())
            self.master, self.master_epoch = broker_id, self.master_epoch + 1
            self.sync_state_set, self.sync_state_set_epoch = frozenset({broker_id}), self.sync_state_set_epoch + 1
            return r.response(header=self._elect_header(), body=self._elect_body())
        if r.code == RequestCode.CONTROLLER_GET_REPLICA_INFO:
            if not self.addresses:
                return r.response(ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed")
            h = GetReplicaInfoResponseHeader(self.master, self.addresses.get(self.master or -1), self.master_epoch)
            return r.response(header=h, body=self._sss())
        if r.code == RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET:
            body = SyncStateSet.decode(r.body)
            if body.syncStateSetEpoch != self.sync_state_set_epoch:
                return r.response(ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH, "fenced")
            self.sync_state_set, self.sync_state_set_epoch = body.syncStateSet, self.sync_state_set_epoch + 1
            return r.response(body=self._sss())
        return r.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "no")

    def _sss(self) -> bytes:
        return SyncStateSet(self.sync_state_set, self.sync_state_set_epoch).encode()

    def _elect_header(self) -> ElectMasterResponseHeader:
        return ElectMasterResponseHeader(self.master, self.addresses.get(self.master or -1), self.master_epoch,
                                         self.sync_state_set_epoch)

    def _elect_body(self) -> bytes:
        group = {"brokerAddrs": {k: v for k, v in self.addresses.items()}, "brokerName": "b", "cluster": "c"}
        return dumps({"brokerMemberGroup": group, "syncStateSet": sorted(self.sync_state_set)}).encode()
