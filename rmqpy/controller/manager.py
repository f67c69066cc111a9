"""The controller as a Twisted service (Java ``ControllerManager`` with ``DLedgerController``).

The leader answers every request that reads or changes the broker sets; it runs them one at a
time (Java's ``EventScheduler``): compute the answer and events against the applied state, append
the events to the replicated log, answer once they are committed. A controller that is not the
leader (or has not yet committed its first entry as leader) answers CONTROLLER_NOT_LEADER.

Liveness (:mod:`rmqpy.controller.heartbeat`) is each controller's own. The leader scans it every
``scanInactiveMasterInterval`` and elects a new master for a set whose master died (as does a
master's heartbeat expiring or its connection closing), then, with ``notifyBrokerRoleChanged``,
tells the set's live brokers with a oneway NOTIFY_BROKER_ROLE_CHANGED.
"""
from __future__ import annotations

from typing import Any, Callable

from twisted.application import service
from twisted.internet import defer, task
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqpy.controller import replicas
from rmqpy.controller.config import ControllerConfig
from rmqpy.controller.elect import DefaultElectPolicy
from rmqpy.controller.heartbeat import BrokerHeartbeatManager
from rmqpy.controller.replicas import Result
from rmqpy.controller.state import ReplicasState
from rmqpy.protocol.bodies.controller import SyncStateSet
from rmqpy.protocol.codes import MQVersion, RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.fastjson import loads as json_loads
from rmqpy.protocol.headers.controller import NotifyBrokerRoleChangedRequestHeader

#: Java ``ControllerRequestProcessor.WAIT_TIMEOUT_OUT``: seconds a request waits for its commit
WAIT_TIMEOUT = 5.0
NOT_LEADER_REMARK = "The controller is not in leader state"


class NotLeader(Exception):
    pass


class ControllerManager(service.Service):
    log = Logger()

    def __init__(self, config: ControllerConfig, replicated_log: Any, clock: Any,
                 send_oneway: Callable[[str, RemotingCommand], Any] | None = None,
                 metadata: Callable[[], dict[str, Any]] | None = None) -> None:
        self.config = config
        #: set by the service when metrics are exported (rmqpy.controller.metrics.ControllerMetrics)
        self.metrics: Any = None
        self.rlog = replicated_log
        self.clock = clock
        self.send_oneway = send_oneway
        self._metadata = metadata
        self.heartbeats = BrokerHeartbeatManager(clock)
        self.heartbeats.listeners.append(self.on_broker_inactive)
        self.policy = DefaultElectPolicy(self.heartbeats.is_active, self.heartbeats.live_info)
        self._serial = defer.DeferredLock()
        self._scan_brokers = task.LoopingCall(self.heartbeats.scan_not_active)
        self._scan_brokers.clock = clock
        self._scan_masters = task.LoopingCall(self.scan_inactive_masters)
        self._scan_masters.clock = clock
        self._first_scan: Any = None
        self.rlog.role_listeners.append(self._on_role)

    @property
    def state(self) -> ReplicasState:
        return self.rlog.state

    def is_leader(self) -> bool:
        return bool(self.rlog.leader_ready)

    # ------------------------------------------------------------------ service
    def startService(self) -> None:
        super().startService()
        # Java: the heartbeat scan starts 2 s after start, then every scanNotActiveBrokerInterval
        self._first_scan = self.clock.callLater(2.0, self._start_broker_scan)
        self.rlog.start()

    def _start_broker_scan(self) -> None:
        self._first_scan = None
        self._scan_brokers.start(self.config.scanNotActiveBrokerInterval / 1000.0)

    def stopService(self) -> defer.Deferred[None]:
        super().stopService()
        if self._first_scan is not None and self._first_scan.active():
            self._first_scan.cancel()
        for loop in (self._scan_brokers, self._scan_masters):
            if loop.running:
                loop.stop()
        return self.rlog.stop()

    def _on_role(self, leader: bool) -> None:
        if self.metrics is not None:  # Java: LEADER once the initial entry committed, as leader_ready
            self.metrics.record_role("leader" if leader else "follower")
        if leader:
            interval = self.config.scanInactiveMasterInterval / 1000.0
            if not self._scan_masters.running:
                self._scan_masters.start(interval, now=False)
        elif self._scan_masters.running:
            self._scan_masters.stop()

    # ------------------------------------------------------------------ the event scheduler
    def run(self, compute: Callable[[ReplicasState], Result], write: bool) -> defer.Deferred[Result]:
        """Compute under the log's lock, append the events, fire with the result once committed.
        Fails with :class:`NotLeader` on a controller that is not the ready leader."""
        if not self.is_leader():
            return defer.fail(NotLeader(NOT_LEADER_REMARK))

        def locked() -> defer.Deferred[Result]:
            if not self.is_leader():
                return defer.fail(NotLeader(NOT_LEADER_REMARK))
            with self.rlog.lock:
                result = compute(self.rlog.state)
            if not write or not result.events:
                return defer.succeed(result)
            started = self.clock.seconds()
            d = self.rlog.append(result.events)
            d.addTimeout(WAIT_TIMEOUT, self.clock)
            if self.metrics is not None:
                d.addBoth(self._appended, started)
            return d.addCallback(lambda _: result)

        return self._serial.run(locked)

    def _appended(self, outcome: Any, started: float) -> Any:
        """Java ``appendToDLedgerAndWait``'s dledger_op_total / dledger_op_latency, for PySyncObj."""
        if isinstance(outcome, Failure):
            status = "timeout" if outcome.check(defer.TimeoutError, defer.CancelledError) else "failed"
        else:
            status = "success"
        self.metrics.append_done(status, started)
        return outcome

    def counted_election(self, cluster: str | None, broker_name: str | None, result: Result) -> Result:
        """An election computed on the leader, counted by its result (Java ``electMaster``)."""
        if self.metrics is not None:
            self.metrics.election(cluster, broker_name, result.code)
        return result

    # ------------------------------------------------------------------ elections
    def on_broker_inactive(self, cluster: str | None, broker_name: str, broker_id: int | None) -> None:
        if not self.is_leader():
            self.log.warn("The broker with brokerId: {id} in broker-set: {name} has been inactive",
                          id=broker_id, name=broker_name)
            return
        if broker_id is None:
            self.trigger_elect(broker_name)
            return
        info = self.state.sync_state.get(broker_name)
        if info is None or info.masterBrokerId != broker_id:
            self.log.info("The broker with brokerId: {id} in broker-set: {name} has been inactive",
                          id=broker_id, name=broker_name)
            return
        self.trigger_elect(broker_name)

    def scan_inactive_masters(self) -> None:
        if not self.is_leader():
            return
        with self.rlog.lock:
            names = replicas.need_reelect(self.state, self.heartbeats.is_active)
        for name in names:
            self.on_broker_inactive(None, name, None)

    @defer.inlineCallbacks
    def trigger_elect(self, broker_name: str) -> Any:
        """Java ``triggerElectMaster``: up to ``electMasterMaxRetryCount`` tries."""
        for attempt in range(max(1, self.config.electMasterMaxRetryCount)):
            try:
                result = yield self.elect(broker_name, None, False)
            except Exception as exc:
                self.log.warn("Failed to trigger elect-master in broker-set: {name}, retryCount: {n}: {err}",
                              name=broker_name, n=attempt, err=exc)
                continue
            if result.code == ResponseCode.SUCCESS:
                return result
            self.log.warn("Failed to trigger elect-master in broker-set: {name}: {code} {remark}",
                          name=broker_name, code=result.code, remark=result.remark)
        return None

    def elect(self, broker_name: str, broker_id: int | None, designate: bool) -> defer.Deferred[Result]:
        d = self.run(lambda s: self.counted_election("", broker_name, replicas.elect_master(
            s, broker_name, broker_id, designate, self.policy, self.config.enableElectUncleanMaster)), True)

        def notify(result: Result) -> Result:
            if result.code == ResponseCode.SUCCESS and self.config.notifyBrokerRoleChanged:
                self.notify_role_changed(broker_name, result)
            return result
        return d.addCallback(notify)

    def notify_role_changed(self, broker_name: str, result: Result) -> None:
        """NOTIFY_BROKER_ROLE_CHANGED, oneway, to each live broker of the set."""
        if self.send_oneway is None:
            return
        header = result.header
        replica = self.state.replica_info.get(broker_name)
        if replica is None or header.masterBrokerId is None:
            return
        body = SyncStateSet(frozenset((header.masterBrokerId,)), header.syncStateSetEpoch or 0).encode()
        for broker_id, address in sorted(replica.id_table().items()):
            if not address or not self.heartbeats.is_active(replica.clusterName, broker_name, broker_id):
                continue
            request = RemotingCommand.request(
                RequestCode.NOTIFY_BROKER_ROLE_CHANGED,
                NotifyBrokerRoleChangedRequestHeader(header.masterAddress, header.masterEpoch,
                                                     header.syncStateSetEpoch, header.masterBrokerId),
                body, oneway=True, version=MQVersion.CURRENT)
            try:
                d = self.send_oneway(address, request)
                if isinstance(d, defer.Deferred):
                    d.addErrback(self._notify_failed, address)
            except Exception as exc:
                self.log.warn("Failed to notify broker {addr} that role changed: {err}", addr=address, err=exc)

    def _notify_failed(self, failure: Any, address: str) -> None:
        self.log.warn("Failed to notify broker {addr} that role changed: {err}", addr=address,
                      err=failure.getErrorMessage())

    # ------------------------------------------------------------------ metadata
    def metadata(self) -> dict[str, Any]:
        """GET_METADATA_INFO's fields: group, controllerLeaderId, controllerLeaderAddress, isLeader, peers."""
        if self._metadata is not None:
            return self._metadata()
        return {"group": None, "controllerLeaderId": None, "controllerLeaderAddress": None,
                "isLeader": self.is_leader(), "peers": ""}


def broker_names_body(body: bytes | None) -> list[str]:
    """GET_SYNC_STATE_DATA's body: a JSON list of broker names."""
    if not body:
        return []
    names = json_loads(body)
    if not isinstance(names, list):
        raise ValueError("GET_SYNC_STATE_DATA body is not a list")
    return [str(n) for n in names]
