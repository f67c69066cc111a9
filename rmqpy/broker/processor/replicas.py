"""ReplicasProcessor: the requests of controller mode a broker answers (Java
``AdminBrokerProcessor.notifyBrokerRoleChanged`` and ``getBrokerEpochCache``).

NOTIFY_BROKER_ROLE_CHANGED (1008) comes from the controller, oneway, to every live broker of a set
after an election: its header names the master, its epoch and the SyncStateSet's epoch, its body
the SyncStateSet. Java applies it when the epoch is newer than the one it holds; rmqpy then asks
the controller leader for the set's replica info and applies that answer instead
(rmqpy/broker/replicas/manager.py), so a forged notification changes nothing. GET_BROKER_EPOCH_CACHE (1007) is ``mqadmin getBrokerEpoch``'s.
A broker not in controller mode answers the first SUCCESS without acting, as Java, and the second
SYSTEM_ERROR "this request only for controllerMode ", as Java.
"""
from __future__ import annotations

from typing import Any, Callable

from rmqpy.broker.replicas.manager import ReplicasManager, epoch_cache
from rmqpy.protocol.bodies.controller import SyncStateSet
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.controller import NotifyBrokerRoleChangedRequestHeader
from rmqpy.remoting.channel import Channel
from rmqpy.remoting.ratelimit import RateLimitedLogger


class ReplicasProcessor:
    log = RateLimitedLogger()
    codes = (RequestCode.NOTIFY_BROKER_ROLE_CHANGED, RequestCode.GET_BROKER_EPOCH_CACHE)

    def __init__(self, manager: Callable[[], ReplicasManager | None], clock: Any) -> None:
        self.log = self.log.on(clock)
        self.manager = manager

    def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        if request.code == RequestCode.NOTIFY_BROKER_ROLE_CHANGED:
            return self.notify_broker_role_changed(request)
        return self.get_broker_epoch_cache(request)

    def notify_broker_role_changed(self, request: RemotingCommand) -> RemotingCommand:
        header = request.decode_header(NotifyBrokerRoleChangedRequestHeader)
        SyncStateSet.decode(request.body)
        self.log.info("Receive notifyBrokerRoleChanged request, try to change brokerRole, request:{header}",
                      header=header)
        manager = self.manager()
        if manager is not None:
            # a hint to ask the controller, not an order (ReplicasManager.role_change_notified says why);
            # the body is still read, so that a malformed one is refused as Java refuses it
            manager.role_change_notified(header.masterEpoch)
        return request.response(ResponseCode.SUCCESS)

    def get_broker_epoch_cache(self, request: RemotingCommand) -> RemotingCommand:
        manager = self.manager()
        if manager is None:
            return request.response(ResponseCode.SYSTEM_ERROR, "this request only for controllerMode ")
        return request.response(ResponseCode.SUCCESS, body=epoch_cache(manager).encode())
