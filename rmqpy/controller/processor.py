"""ControllerRequestProcessor: the controller's request codes (Java ``ControllerRequestProcessor``).

Answered by every controller: BROKER_HEARTBEAT (each keeps its own liveness) and
CONTROLLER_GET_METADATA_INFO (who leads; brokers and mqadmin ask any controller for it). Every other
code goes through the leader's scheduler; a controller that is not the leader answers
CONTROLLER_NOT_LEADER "The controller is not in leader state", as Java's ``EventScheduler`` does
(without the leader's address: Java's answer has none, callers ask GET_METADATA_INFO). An entry
the log does not commit within 5 s is SYSTEM_ERROR, as Java's ``future.get(5 s)`` throwing.
"""
from __future__ import annotations

from typing import Any, Callable

from twisted.internet import defer
from twisted.logger import Logger

from rmqpy.common.properties import PropertiesError, apply_properties, parse_properties
from rmqpy.controller import replicas
from rmqpy.controller.manager import ControllerManager, NotLeader, broker_names_body
from rmqpy.controller.metrics import FAILED, SUCCESS, TIMEOUT, ControllerMetrics
from rmqpy.controller.replicas import Result
from rmqpy.protocol.bodies.controller import SyncStateSet
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    GetMetaDataResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    RegisterBrokerToControllerRequestHeader,
)
from rmqpy.protocol.headers.namesrv import BrokerHeartbeatRequestHeader

Handler = Callable[[Any, RemotingCommand], Any]


class ControllerRequestProcessor:
    log = Logger()

    def __init__(self, manager: ControllerManager, config_text: Callable[[], str] | None = None,
                 configs: Callable[[], list[Any]] | None = None, metrics: ControllerMetrics | None = None) -> None:
        self.manager = manager
        self.metrics = metrics
        self.config_text = config_text
        self.configs = configs
        self.handlers: dict[int, Handler] = {
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: self.alter_sync_state_set,
            RequestCode.CONTROLLER_ELECT_MASTER: self.elect_master,
            RequestCode.CONTROLLER_GET_REPLICA_INFO: self.get_replica_info,
            RequestCode.CONTROLLER_GET_METADATA_INFO: self.get_metadata,
            RequestCode.BROKER_HEARTBEAT: self.heartbeat,
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: self.get_sync_state_data,
            RequestCode.GET_CONTROLLER_CONFIG: self.get_config,
            RequestCode.UPDATE_CONTROLLER_CONFIG: self.update_config,
            RequestCode.CLEAN_BROKER_DATA: self.clean_broker_data,
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: self.get_next_broker_id,
            RequestCode.CONTROLLER_APPLY_BROKER_ID: self.apply_broker_id,
            RequestCode.CONTROLLER_REGISTER_BROKER: self.register_broker,
        }

    def process_request(self, channel: Any, request: RemotingCommand) -> Any:
        """The handler's answer; with metrics, counted as Java's ``processRequest`` counts it."""
        metrics = self.metrics
        started = self.manager.clock.seconds()
        try:
            result = self.handlers[request.code](channel, request)
        except Exception:
            if metrics is not None:
                metrics.request_done(request.code, FAILED, started)
            raise
        if isinstance(result, defer.Deferred):
            return result.addCallbacks(self._answered, self._failed, callbackArgs=(request, started),
                                       errbackArgs=(request, started))
        if metrics is not None:
            metrics.request_done(request.code, SUCCESS, started)
        return result

    def _answered(self, response: RemotingCommand, request: RemotingCommand, started: float) -> RemotingCommand:
        if self.metrics is not None:
            self.metrics.request_done(request.code, SUCCESS, started)
        return response

    def _failed(self, failure: Any, request: RemotingCommand, started: float) -> RemotingCommand:
        """A scheduled request that did not complete: CONTROLLER_NOT_LEADER (an answer, as Java's
        scheduler makes it), or SYSTEM_ERROR as Java's remoting answers an exception."""
        if failure.check(NotLeader):
            status, response = SUCCESS, request.response(ResponseCode.CONTROLLER_NOT_LEADER, str(failure.value))
        elif failure.check(defer.TimeoutError, defer.CancelledError):
            status, response = TIMEOUT, request.response(ResponseCode.SYSTEM_ERROR,
                                                         "java.util.concurrent.TimeoutException")
        else:
            self.log.warn("controller request {code} failed: {err}", code=request.code, err=failure.getErrorMessage())
            status, response = FAILED, request.response(ResponseCode.SYSTEM_ERROR, failure.getErrorMessage())
        if self.metrics is not None:
            self.metrics.request_done(request.code, status, started)
        return response

    # ------------------------------------------------------------------ helpers
    def _answer(self, request: RemotingCommand, compute: Callable[[Any], Result], write: bool,
                after: Callable[[Result], Any] | None = None) -> defer.Deferred[RemotingCommand]:
        """The result as the answer; a failure goes on to :meth:`_failed` (process_request)."""
        d = self.manager.run(compute, write)
        if after is not None:
            d.addCallback(lambda r: (after(r), r)[1])

        def ok(result: Result) -> RemotingCommand:
            return request.response(result.code, result.remark, header=result.header, body=result.body)

        return d.addCallback(ok)

    # ------------------------------------------------------------------ handlers
    def alter_sync_state_set(self, channel: Any, request: RemotingCommand) -> Any:
        h = request.decode_header(AlterSyncStateSetRequestHeader)
        new = SyncStateSet.decode(request.body)
        return self._answer(request, lambda s: replicas.alter_sync_state_set(
            s, h.brokerName or "", h.masterBrokerId, h.masterEpoch, new, self.manager.heartbeats.is_active), True)

    def elect_master(self, channel: Any, request: RemotingCommand) -> Any:
        h = request.decode_header(ElectMasterRequestHeader)
        m = self.manager

        def notify(result: Result) -> None:
            if result.code == ResponseCode.SUCCESS and m.config.notifyBrokerRoleChanged:
                m.notify_role_changed(h.brokerName, result)

        return self._answer(request, lambda s: m.counted_election(h.clusterName, h.brokerName, replicas.elect_master(
            s, h.brokerName, h.brokerId, bool(h.designateElect), m.policy, m.config.enableElectUncleanMaster)),
            True, notify)

    def get_replica_info(self, channel: Any, request: RemotingCommand) -> Any:
        h = request.decode_header(GetReplicaInfoRequestHeader)
        return self._answer(request, lambda s: replicas.replica_info(s, h.brokerName or ""), False)

    def get_metadata(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        meta = self.manager.metadata()
        return request.response(ResponseCode.SUCCESS, header=GetMetaDataResponseHeader(
            meta.get("group"), meta.get("controllerLeaderId"), meta.get("controllerLeaderAddress"),
            bool(meta.get("isLeader")), meta.get("peers")))

    def heartbeat(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(BrokerHeartbeatRequestHeader)
        if h.brokerId is None:
            return request.response(ResponseCode.CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId")
        self.manager.heartbeats.on_heartbeat(h.clusterName, h.brokerName, h.brokerAddr, h.brokerId,
                                             h.heartbeatTimeoutMills, channel, h.epoch, h.maxOffset,
                                             h.confirmOffset, h.electionPriority)
        return request.response(ResponseCode.SUCCESS, "Heart beat success")

    def get_sync_state_data(self, channel: Any, request: RemotingCommand) -> Any:
        names = broker_names_body(request.body)
        if not names:
            return request.response(ResponseCode.SYSTEM_ERROR)
        return self._answer(request, lambda s: replicas.sync_state_data(
            s, names, self.manager.heartbeats.is_active), False)

    def get_config(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        text = self.config_text() if self.config_text is not None else ""
        return request.response(ResponseCode.SUCCESS, body=text.encode("utf-8") if text else None)

    def update_config(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """Java ``handleUpdateControllerConfig``: the keys of ``configBlackList`` (and configBlackList,
        configStorePath, rocketmqHome) are refused; the others set in memory (rmqpy does not write
        them back to the -c file, as Java's Configuration.persist does)."""
        if request.body:
            try:
                props = parse_properties(request.body.decode("utf-8"))
            except (UnicodeDecodeError, PropertiesError) as exc:
                return request.response(ResponseCode.SYSTEM_ERROR, f"string2Properties error: {exc}")
            black = {"configBlackList", "configStorePath", "rocketmqHome",
                     *(k for k in self.manager.config.configBlackList.split(";") if k)}
            if black & set(props):
                return request.response(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
            if self.configs is not None:
                try:
                    unknown = apply_properties(self.configs(), props)
                except PropertiesError as exc:
                    return request.response(ResponseCode.SYSTEM_ERROR, str(exc))
                if unknown:
                    self.log.warn("UPDATE_CONTROLLER_CONFIG: unknown config keys ignored: {keys}",
                                  keys=ascii(unknown[:5])[:200])
        return request.response(ResponseCode.SUCCESS)

    def clean_broker_data(self, channel: Any, request: RemotingCommand) -> Any:
        h = request.decode_header(CleanControllerBrokerDataRequestHeader)
        return self._answer(request, lambda s: replicas.clean_broker_data(
            s, h.clusterName, h.brokerName, h.brokerControllerIdsToClean, bool(h.isCleanLivingBroker),
            self.manager.heartbeats.is_active), True)

    def get_next_broker_id(self, channel: Any, request: RemotingCommand) -> Any:
        h = request.decode_header(GetNextBrokerIdRequestHeader)
        return self._answer(request, lambda s: replicas.next_broker_id(s, h.clusterName, h.brokerName or ""), False)

    def apply_broker_id(self, channel: Any, request: RemotingCommand) -> Any:
        h = request.decode_header(ApplyBrokerIdRequestHeader)
        return self._answer(request, lambda s: replicas.apply_broker_id(
            s, h.clusterName, h.brokerName or "", h.appliedBrokerId, h.registerCheckCode or ""), True)

    def register_broker(self, channel: Any, request: RemotingCommand) -> Any:
        h = request.decode_header(RegisterBrokerToControllerRequestHeader)
        return self._answer(request, lambda s: replicas.register_broker(
            s, h.clusterName or "", h.brokerName or "", h.brokerId, h.brokerAddress or "",
            self.manager.heartbeats.is_active), True)
