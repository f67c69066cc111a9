"""The broker's side of controller mode (Java ``broker/controller/ReplicasManager``), as a Twisted
service of the broker's tree, built only with ``enableControllerMode=true``.

At start, as Java 5.3.3 does:

1. **Controllers** -- the addresses of ``controllerAddr`` (``;``-separated, or one name resolved
   with ``fetchControllerAddrByDnsLookup``, again every 2 minutes); every 3 s each is checked
   for a connection. The leader is the ``controllerLeaderAddress`` the first reachable controller
   answers to CONTROLLER_GET_METADATA_INFO (3 tries, 1 s apart; then every
   ``syncControllerMetadataPeriod``).
2. **Broker id** -- from ``brokerIdentity`` if it is there; else GET_NEXT_BROKER_ID, the id and a
   check code written to ``brokerIdentity-temp``, APPLY_BROKER_ID, then ``brokerIdentity`` written
   and the temp file deleted (rmqpy/broker/replicas/identity.py). A file naming another cluster or
   broker name stops the registration with one error line. Then REGISTER_BROKER_TO_CONTROLLER,
   whose answer may already name the master. Five tries, up to 1 s apart.
3. **Election** -- one heartbeat, then, when the answer named no master, ELECT_MASTER for itself.
   Until a master is known the broker is fenced: its store refuses puts, it runs no role's
   services and does not register with the name servers. Any failure: all again in 5 s.

Then, every ``syncBrokerMetadataPeriod`` (first after 3 s), GET_REPLICA_INFO: a higher master
epoch than the one held changes the role (or asks for an election when the set has no master);
the same epoch updates the SyncStateSet of a master. BROKER_HEARTBEAT (oneway, with the epoch, max
and confirm offsets from the HA side) goes to every reachable controller every
``brokerHeartbeatInterval``. A master checks its SyncStateSet every ``checkSyncStateSetPeriod`` and
reports it by ALTER_SYNC_STATE_SET only when it differs from the controller's. The controller's
NOTIFY_BROKER_ROLE_CHANGED (rmqpy/broker/processor/replicas.py) goes to :meth:`role_change_notified`,
which asks the controller rather than trusting the notification.

A role is applied through the broker's role switch: master is SYNC_MASTER with brokerId 0, a slave
keeps the controller's id as its brokerId (Java: "the brokerId in brokerConfig just means its
role"), so the name servers see 0 for the master; every change moves the topic table's data version
(its stateVersion is the master epoch) and registers with the name servers. Replication is asked
for through :class:`~rmqpy.broker.replicas.ha.ReplicaHA`.
"""
from __future__ import annotations

import enum
import random
from typing import Any, Callable, Coroutine, Protocol

from twisted.application import service
from twisted.internet import defer
from twisted.python.failure import Failure

from rmqpy.broker.periodic import PeriodicJob
from rmqpy.broker.replicas.client import ControllerClient, ControllerError, MasterInfo, controller_addresses
from rmqpy.broker.replicas.ha import ReplicaHA
from rmqpy.broker.replicas.identity import BrokerIdentity, IdentityFile
from rmqpy.protocol.bodies.controller import EpochEntry, EpochEntryCache
from rmqpy.protocol.codes import ResponseCode
from rmqpy.protocol.headers.namesrv import BrokerHeartbeatRequestHeader
from rmqpy.remoting.ratelimit import RateLimitedLogger
from rmqpy.store.role import MASTER_ID, BrokerRole, role_of

RETRY_INTERVAL = 5.0  # Java RETRY_INTERVAL_SECOND
REGISTER_TRIES = 5
METADATA_TRIES = 3


class State(enum.Enum):
    INITIAL = "INITIAL"
    FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE = "FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE"
    REGISTER_TO_CONTROLLER_DONE = "REGISTER_TO_CONTROLLER_DONE"
    RUNNING = "RUNNING"
    SHUTDOWN = "SHUTDOWN"


class RegisterState(enum.Enum):
    INITIAL = "INITIAL"
    CREATE_TEMP_METADATA_FILE_DONE = "CREATE_TEMP_METADATA_FILE_DONE"
    CREATE_METADATA_FILE_DONE = "CREATE_METADATA_FILE_DONE"
    REGISTERED = "REGISTERED"


class ReplicasHost(Protocol):
    """What the replicas manager needs of the broker (BrokerController)."""

    broker_config: Any
    store_config: Any
    broker_addr: str

    def apply_controller_role(self, role: BrokerRole, broker_id: int, master_address: str | None) -> None: ...
    def next_data_version(self, state_version: int) -> None: ...
    def set_fenced(self, fenced: bool) -> None: ...
    def register_broker_all(self) -> defer.Deferred[Any]: ...


class ReplicasManager(service.MultiService):
    log = RateLimitedLogger()  # a controller that is down fails every period: one line per kind and second

    def __init__(self, host: ReplicasHost, client: ControllerClient, ha: ReplicaHA, clock: Any,
                 identity: IdentityFile, temp_identity: IdentityFile,
                 reachable: Callable[[str], defer.Deferred[bool]],
                 resolve: Callable[[str], list[str]] | None = None,
                 rng: random.Random | None = None) -> None:
        super().__init__()
        self.setName("replicas-manager")
        self.log = self.log.on(clock)
        self.host = host
        self.client = client
        self.ha = ha
        self.clock = clock
        self.identity = identity
        self.temp_identity = temp_identity
        self._reachable = reachable
        self._resolve = resolve
        self._rng = rng or random.Random()
        self.config = host.broker_config
        self.broker_address = host.broker_addr
        self.state = State.INITIAL
        self.register_state = RegisterState.INITIAL
        self.controller_addresses: list[str] = []
        self.available: dict[str, bool] = {}
        self.controller_leader_address = ""
        self.broker_controller_id: int | None = None
        self.master_broker_id: int | None = None
        self.master_address = ""
        self.master_epoch = 0
        self.sync_state_set: frozenset[int] = frozenset()
        self.sync_state_set_epoch = 0
        self._check_sync_state_set: PeriodicJob | None = None
        self._busy: set[str] = set()
        self._retry: Any = None
        self.started: defer.Deferred[bool] | None = None  # the first start's outcome (tests wait on it)
        self._listening = False  # the HA side's in-sync set listener is registered
        self._wanted_sync_state_set: frozenset[int] | None = None  # heard from the HA side, not reported yet
        self._verifying: defer.Deferred[None] | None = None  # a role notification being checked
        c = self.config
        for job in (
            PeriodicJob("update-controller-addr", clock, 120.0, 120.0, self.update_controller_addr),
            PeriodicJob("scan-controllers", clock, 3.0, 3.0, self._guarded("scan", self.scan_available_controllers)),
            PeriodicJob("controller-heartbeat", clock, 1.0, c.brokerHeartbeatInterval / 1000.0, self._heartbeat_job),
        ):
            job.setServiceParent(self)

    # ------------------------------------------------------------------ lifecycle
    def startService(self) -> None:  # noqa: N802 (Twisted's name)
        super().startService()
        self.state = State.INITIAL
        self.update_controller_addr()
        self.started = defer.ensureDeferred(self._start())

    async def _start(self) -> bool:
        await self.scan_available_controllers()
        if await self._start_basic_service():
            return True
        self.log.error("Failed to start replicasManager")
        tries = 0
        while self.state is not State.SHUTDOWN:
            await self._sleep(RETRY_INTERVAL)
            tries += 1
            if self.state is State.SHUTDOWN:
                break
            self.log.warn("Failed to start replicasManager, retry times:{tries}, current state:{state}, try it again",
                          tries=tries, state=self.state.value)
            if await self._start_basic_service():
                self.log.info("Start replicasManager success, retry times:{tries}", tries=tries)
                return True
        return False

    def stopService(self) -> Any:  # noqa: N802 (Twisted's name)
        self.state = State.SHUTDOWN
        self.register_state = RegisterState.INITIAL
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        return super().stopService()

    def _sleep(self, seconds: float) -> defer.Deferred[None]:
        d: defer.Deferred[None] = defer.Deferred()
        self._retry = self.clock.callLater(seconds, d.callback, None)
        return d

    def _guarded(self, name: str, job: Callable[[], Coroutine[Any, Any, Any]]) -> Callable[[], Any]:
        """A periodic job that does not start again while its last run still waits on a controller."""
        def run() -> Any:
            if name in self._busy or not self.running:
                return None
            self._busy.add(name)
            d = defer.ensureDeferred(job())
            d.addErrback(lambda f: self.log.failure("controller mode: {name} failed", f, name=name))
            d.addBoth(lambda _: self._busy.discard(name))
            return d
        return run

    def _add_job(self, job: PeriodicJob) -> PeriodicJob:
        job.setServiceParent(self)
        return job

    async def _start_basic_service(self) -> bool:
        if self.state is State.SHUTDOWN:
            return False
        if self.state is State.INITIAL:
            if not await self._first_sync_controller_metadata():
                return False
            self.state = State.FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE
            self.log.info("First time sync controller metadata success, change state to: {state}",
                          state=self.state.value)
        if self.state is State.FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE:
            for _ in range(REGISTER_TRIES):
                if await self.register():
                    self.state = State.REGISTER_TO_CONTROLLER_DONE
                    self.log.info("First time register broker success, change state to: {state}",
                                  state=self.state.value)
                    break
                if self.state is State.SHUTDOWN:
                    return False
                await self._sleep(self._rng.random())  # Java: a random pause against concurrent registrations
            if self.state is not State.REGISTER_TO_CONTROLLER_DONE:
                self.log.error("Register to broker failed {n} times", n=REGISTER_TRIES)
                return False
        if self.state is State.REGISTER_TO_CONTROLLER_DONE:
            self.send_heartbeat_to_controller()  # the periodic heartbeat skips a fenced broker
            if self.master_broker_id is None and not await self.broker_elect():
                return False
            self.log.info("Master in this broker set is elected, masterBrokerId: {id}, masterBrokerAddr: {addr}",
                          id=self.master_broker_id, addr=self.master_address)
            self.state = State.RUNNING
            self.host.set_fenced(False)
            self.log.info("All register process has been done, change state to: {state}", state=self.state.value)
        self._add_job(PeriodicJob("sync-broker-metadata", self.clock, 3.0, self.config.syncBrokerMetadataPeriod / 1000.0,
                                  self._guarded("sync-broker-metadata", self.sync_broker_metadata)))
        listen = getattr(self.ha, "add_sync_state_set_listener", None)
        if listen is not None and not self._listening:  # Java registerSyncStateSetChangedListener
            self._listening = True
            listen(self.sync_state_set_changed)
        return True

    # ------------------------------------------------------------------ controllers
    def update_controller_addr(self) -> None:
        c = self.config
        found = controller_addresses(c.controllerAddr, c.fetchControllerAddrByDnsLookup, self._resolve)
        if found or not c.fetchControllerAddrByDnsLookup:
            self.controller_addresses = found
        if c.fetchControllerAddrByDnsLookup and not found:
            self.log.error("dns lookup address by domain error, domain={domain}", domain=c.controllerAddr)

    async def scan_available_controllers(self) -> None:
        """Java ``scanAvailableControllerAddresses``: keep the controllers a connection reaches."""
        for addr in list(self.available):
            if addr not in self.controller_addresses:
                self.log.warn("scanAvailableControllerAddresses remove invalid address {addr}", addr=addr)
                del self.available[addr]
        addrs = list(self.controller_addresses)
        results = await defer.DeferredList([defer.maybeDeferred(self._reachable, a) for a in addrs],
                                           consumeErrors=True)
        for addr, (ok, reached) in zip(addrs, results):
            if ok and reached:
                self.available.setdefault(addr, True)
            elif self.available.pop(addr, None) is not None:
                self.log.warn("scanAvailableControllerAddresses remove unconnected address {addr}", addr=addr)

    async def _first_sync_controller_metadata(self) -> bool:
        for attempt in range(METADATA_TRIES):
            if await self.update_controller_metadata():
                self._add_job(PeriodicJob("sync-controller-metadata", self.clock, 3.0,
                                          self.config.syncControllerMetadataPeriod / 1000.0,
                                          self._guarded("sync-controller-metadata", self.update_controller_metadata)))
                return True
            if attempt < METADATA_TRIES - 1:
                await self._sleep(1.0)
        self.log.error("Failed to init controller metadata, maybe the controllers in {addrs} is not available "
                       "(reachable: {reached}; none named a leader)", addrs=self.controller_addresses,
                       reached=sorted(self.available))
        return False

    async def update_controller_metadata(self) -> bool:
        """The leader, as the first reachable controller that names one tells."""
        for addr in list(self.available):
            try:
                answer = await self.client.get_metadata(addr)
            except Exception as exc:  # noqa: BLE001 (a controller down, or an answer that cannot be read)
                self.log.error("Failed to update controller metadata from {addr}: {err}", addr=addr, err=_text(exc))
                continue
            if answer.controllerLeaderAddress:
                if answer.controllerLeaderAddress != self.controller_leader_address:
                    self.log.info("Update controller leader address to {leader}", leader=answer.controllerLeaderAddress)
                self.controller_leader_address = answer.controllerLeaderAddress
                return True
        return False

    # ------------------------------------------------------------------ registration
    def _confirm_registering_state(self) -> None:
        try:
            self.identity.read()
        except (OSError, ValueError) as exc:
            self.log.error("Read metadata file {path} failed: {err}", path=self.identity.path, err=_text(exc))
        if self.identity.identity is not None:
            self.register_state = RegisterState.CREATE_METADATA_FILE_DONE
            self._set_controller_id(self.identity.identity.broker_id)
            return
        try:
            self.temp_identity.read()
        except (OSError, ValueError) as exc:
            self.log.error("Read temp metadata file {path} failed: {err}", path=self.temp_identity.path,
                           err=_text(exc))
        if self.temp_identity.identity is not None:
            self.register_state = RegisterState.CREATE_TEMP_METADATA_FILE_DONE

    def _set_controller_id(self, broker_id: int) -> None:
        self.broker_controller_id = broker_id
        self.ha.set_local_broker_id(broker_id)

    def _metadata_valid(self) -> bool:
        c = self.config
        for state, file, what in ((RegisterState.CREATE_TEMP_METADATA_FILE_DONE, self.temp_identity, "broker temp metadata"),
                                  (RegisterState.CREATE_METADATA_FILE_DONE, self.identity, "broker metadata")):
            held = file.identity
            if self.register_state is not state or held is None:
                continue
            for key, mine, theirs in (("clusterName", held.cluster_name, c.brokerClusterName),
                                      ("brokerName", held.broker_name, c.brokerName)):
                if mine != theirs:
                    self.log.error("The {key}: {mine} in {what} ({path}) is different from the {key}: {theirs} in "
                                   "broker config", key=key, mine=mine, what=what, path=file.path, theirs=theirs)
                    return False
        return True

    async def register(self) -> bool:
        """Java ``register``: the broker id from the files or the controller, then registration."""
        c = self.config
        try:
            self._confirm_registering_state()
            self.log.info("Confirm now register state: {state}", state=self.register_state.value)
            if not self._metadata_valid():
                self.log.error("Check and find that metadata/tempMetadata invalid, you can modify the broker config "
                               "to make them valid")
                return False
            if self.register_state is RegisterState.INITIAL:
                try:
                    next_id = await self.client.next_broker_id(self.controller_leader_address, c.brokerClusterName,
                                                               c.brokerName)
                except Exception as exc:  # noqa: BLE001
                    self.log.error("fail to get next broker id from controller {leader}: {err}",
                                   leader=self.controller_leader_address, err=_text(exc))
                    return False
                code = f"{self.broker_address};{int(self.clock.seconds() * 1000)}"
                try:
                    self.temp_identity.write(BrokerIdentity(c.brokerClusterName, c.brokerName, next_id, code))
                except OSError as exc:
                    self.log.error("update and persist temp broker metadata file failed: {err}", err=_text(exc))
                    self.temp_identity.clear()
                    return False
                self.register_state = RegisterState.CREATE_TEMP_METADATA_FILE_DONE
                self.log.info("Register state change to {state}, temp metadata: {meta}",
                              state=self.register_state.value, meta=self.temp_identity.identity)
            if self.register_state is RegisterState.CREATE_TEMP_METADATA_FILE_DONE:
                temp = self.temp_identity.identity
                assert temp is not None and temp.register_check_code is not None
                try:
                    await self.client.apply_broker_id(self.controller_leader_address, c.brokerClusterName,
                                                      c.brokerName, temp.broker_id, temp.register_check_code)
                except Exception as exc:  # noqa: BLE001 (the id is taken: start over)
                    self.log.error("fail to apply broker id: {id}: {err}", id=temp.broker_id, err=_text(exc))
                    self.temp_identity.clear()
                    self.register_state = RegisterState.INITIAL
                    return False
                try:
                    self.identity.write(BrokerIdentity(c.brokerClusterName, c.brokerName, temp.broker_id))
                    self.temp_identity.clear()
                except OSError as exc:
                    self.log.error("fail to create metadata file: {err}", err=_text(exc))
                    self.identity.clear()
                    return False
                self._set_controller_id(temp.broker_id)
                self.register_state = RegisterState.CREATE_METADATA_FILE_DONE
                self.log.info("Register state change to: {state}, metadata: {meta}", state=self.register_state.value,
                              meta=self.identity.identity)
            if self.register_state is RegisterState.CREATE_METADATA_FILE_DONE:
                if not await self.register_broker_to_controller():
                    self.log.error("Failed to register broker to controller")
                    return False
                self.register_state = RegisterState.REGISTERED
                self.log.info("Register state change to: {state}, masterBrokerId: {id}, masterBrokerAddr: {addr}",
                              state=self.register_state.value, id=self.master_broker_id, addr=self.master_address)
            return True
        except Exception as exc:  # noqa: BLE001
            self.log.failure("Failed to register broker to controller: {err}", err=_text(exc))
            return False

    async def register_broker_to_controller(self) -> bool:
        c = self.config
        assert self.broker_controller_id is not None
        try:
            info = await self.client.register(self.controller_leader_address, c.brokerClusterName, c.brokerName,
                                              self.broker_controller_id, self.broker_address)
        except Exception as exc:  # noqa: BLE001
            self.log.error("fail to send registerBrokerToController request to controller {leader}: {err}",
                           leader=self.controller_leader_address, err=_text(exc))
            return False
        if info.master_broker_id is None:
            return True
        self._apply_master(info)
        return True

    # ------------------------------------------------------------------ election and roles
    async def broker_elect(self) -> bool:
        c = self.config
        assert self.broker_controller_id is not None
        try:
            info = await self.client.elect(self.controller_leader_address, c.brokerClusterName, c.brokerName,
                                           self.broker_controller_id)
        except Exception as exc:  # noqa: BLE001
            self.log.error("Failed to try elect at controller {leader}: {err}", leader=self.controller_leader_address,
                           err=_text(exc))
            return False
        if not info.has_master:
            self.log.warn("Now no master in broker set")
            return False
        self._apply_master(info)
        return True

    def _apply_master(self, info: MasterInfo) -> None:
        assert info.master_broker_id is not None
        if info.master_broker_id == self.broker_controller_id:
            self.change_to_master(info.master_epoch, info.sync_state_set_epoch, info.sync_state_set)
        else:
            self.change_to_slave(info.master_address or "", info.master_epoch, info.master_broker_id)

    def role_change_notified(self, master_epoch: int | None) -> defer.Deferred[None] | None:
        """NOTIFY_BROKER_ROLE_CHANGED of a newer epoch than the one held: the controller leader is asked
        for the set's replica info (GET_REPLICA_INFO, as the periodic sync does) and its answer is
        applied, not the notification's header. Java applies the header as it comes, so whoever
        reaches the remoting port could demote a master or point its replicas at a stranger; here a
        forged notification costs one question to the controller. An older or equal epoch is ignored
        without asking, as Java ignores it. Returns the check's Deferred (None when ignored)."""
        if master_epoch is None or master_epoch <= self.master_epoch or self.broker_controller_id is None:
            return None
        if self._verifying is not None:  # one check at a time: it reads the newest answer anyway
            return self._verifying

        async def verify() -> None:
            try:
                if not await self.sync_broker_metadata():  # the leader moved: who leads now, then again
                    if await self.update_controller_metadata():
                        await self.sync_broker_metadata()
            except Exception:  # noqa: BLE001 (logged; the periodic sync tries again)
                self.log.failure("Failed to check a role change notification with the controller", Failure())
            finally:
                self._verifying = None

        checked = defer.ensureDeferred(verify())
        if not checked.called:  # answered at once (a controller in memory): nothing to wait for
            self._verifying = checked
        return checked

    def change_to_master(self, new_epoch: int, sync_state_set_epoch: int, sync_state_set: frozenset[int]) -> None:
        if new_epoch <= self.master_epoch:
            return
        c = self.config
        self.log.info("Begin to change to master, brokerName:{name}, replicas:{addr}, new Epoch:{epoch}",
                      name=c.brokerName, addr=self.broker_address, epoch=new_epoch)
        self.master_epoch = new_epoch
        if (self.master_broker_id is not None and self.master_broker_id == self.broker_controller_id
                and c.brokerId == MASTER_ID):  # still the master, of a new epoch
            self.change_sync_state_set(sync_state_set, sync_state_set_epoch)
            self.ha.change_to_master_when_last_role_is_master(new_epoch)
            self.host.next_data_version(new_epoch)
            self._report_later()
            self.register_broker_when_role_change()
            return
        self.change_sync_state_set(sync_state_set, sync_state_set_epoch)
        self.ha.change_to_master(new_epoch)
        self.host.apply_controller_role(BrokerRole.SYNC_MASTER, MASTER_ID, None)
        self.master_address = self.broker_address
        self.master_broker_id = self.broker_controller_id
        self._schedule_check_sync_state_set()
        self.host.next_data_version(new_epoch)
        self._report_later()
        self.register_broker_when_role_change()

    def change_to_slave(self, new_master_address: str, new_epoch: int, new_master_id: int) -> None:
        if new_epoch <= self.master_epoch:
            return
        assert self.broker_controller_id is not None
        self.log.info("Begin to change to slave, brokerName={name}, brokerId={id}, newMasterBrokerId={master}, "
                      "newMasterAddress={addr}, newMasterEpoch={epoch}", name=self.config.brokerName,
                      id=self.broker_controller_id, master=new_master_id, addr=new_master_address, epoch=new_epoch)
        self.master_epoch = new_epoch
        if new_master_id == self.master_broker_id:  # the master stays, of a new epoch
            self.ha.change_to_slave_when_master_not_change(new_master_address, new_epoch)
            self.host.next_data_version(new_epoch)
            self.register_broker_when_role_change()
            return
        self._stop_check_sync_state_set()
        self.host.apply_controller_role(BrokerRole.SLAVE, self.broker_controller_id, new_master_address)
        self.master_address = new_master_address
        self.master_broker_id = new_master_id
        self.ha.change_to_slave(new_master_address, new_epoch, self.broker_controller_id)
        self.host.next_data_version(new_epoch)
        self.register_broker_when_role_change()

    def register_broker_when_role_change(self) -> None:
        def done(result: Any) -> None:
            self.log.info("Change broker [id:{id}][address:{addr}] to {role}, newMasterBrokerId:{master}, "
                          "newMasterAddress:{maddr}, newMasterEpoch:{epoch}, syncStateSetEpoch:{sepoch}",
                          id=self.broker_controller_id, addr=self.broker_address,
                          role=role_of(self.host.store_config).value, master=self.master_broker_id,
                          maddr=self.master_address, epoch=self.master_epoch, sepoch=self.sync_state_set_epoch)

        d = defer.maybeDeferred(self.host.register_broker_all)
        d.addCallbacks(done, lambda f: self.log.failure(
            "Error happen when register broker to name-srv, Failed to change broker to {role}", f,
            role=role_of(self.host.store_config).value))

    def change_sync_state_set(self, new_set: frozenset[int], new_epoch: int) -> None:
        if new_epoch > self.sync_state_set_epoch:
            self.log.info("SyncStateSet changed from {old} to {new}", old=sorted(self.sync_state_set),
                          new=sorted(new_set))
            self.sync_state_set_epoch = new_epoch
            self.sync_state_set = frozenset(new_set)
            self.ha.set_sync_state_set(self.sync_state_set)

    def is_master_state(self) -> bool:
        return role_of(self.host.store_config) is BrokerRole.SYNC_MASTER

    # ------------------------------------------------------------------ periodic work
    async def sync_broker_metadata(self) -> bool:
        """Java ``schedulingSyncBrokerMetadata``'s task; False when the leader did not answer it."""
        c = self.config
        try:
            info = await self.client.replica_info(self.controller_leader_address, c.brokerName)
        except ControllerError as exc:
            self.log.warn("Error happen when get broker {name}'s metadata: {err}", name=c.brokerName, err=_text(exc))
            if exc.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST:
                await self.register_broker_to_controller()
                return True
            return exc.code != ResponseCode.CONTROLLER_NOT_LEADER
        except Exception as exc:  # noqa: BLE001
            self.log.warn("Error happen when get broker {name}'s metadata: {err}", name=c.brokerName, err=_text(exc))
            return False
        if info.master_epoch > self.master_epoch:
            if info.has_master:
                self._apply_master(info)
            else:  # no master in the controller: asking for an election makes it elect one
                await self.broker_elect()
        elif info.master_epoch == self.master_epoch and self.is_master_state():
            self.change_sync_state_set(info.sync_state_set, info.sync_state_set_epoch)
        return True

    def _schedule_check_sync_state_set(self) -> None:
        self._stop_check_sync_state_set()
        self._check_sync_state_set = self._add_job(PeriodicJob(
            "check-sync-state-set", self.clock, 3.0, self.config.checkSyncStateSetPeriod / 1000.0,
            self._guarded("check-sync-state-set", self.check_sync_state_set_and_report)))

    def _stop_check_sync_state_set(self) -> None:
        if self._check_sync_state_set is not None:
            self._check_sync_state_set.disownServiceParent()
            self._check_sync_state_set = None

    def _report_later(self) -> None:
        """Java submits checkSyncStateSetAndDoReport to its executor: after the role change, not in it."""
        self.clock.callLater(0, self._guarded("check-sync-state-set", self.check_sync_state_set_and_report))

    async def check_sync_state_set_and_report(self) -> None:
        assert self.broker_controller_id is not None
        new_set = set(self.ha.maybe_shrink_sync_state_set())
        new_set.add(self.broker_controller_id)
        if frozenset(new_set) == self.sync_state_set:
            return
        await self.report_sync_state_set_changed(frozenset(new_set))

    def sync_state_set_changed(self, new_set: frozenset[int]) -> None:
        """The HA side's listener (Java ``doReportSyncStateSetChanged`` registered with the
        service): a replica caught up or left. Reported by ALTER_SYNC_STATE_SET, one request at
        a time: what is heard while one is under way is reported after it, the newest set only."""
        if self.state is not State.RUNNING or not self.is_master_state():
            return
        self._wanted_sync_state_set = frozenset(new_set)
        if "report-sync-state-set" in self._busy:
            return
        self._busy.add("report-sync-state-set")

        async def report() -> None:
            while self._wanted_sync_state_set is not None and self.is_master_state():
                wanted, self._wanted_sync_state_set = self._wanted_sync_state_set, None
                if wanted != self.sync_state_set:
                    await self.report_sync_state_set_changed(wanted)

        d = defer.ensureDeferred(report())
        d.addErrback(lambda f: self.log.failure("controller mode: reporting the in-sync set failed", f))
        d.addBoth(lambda _: self._busy.discard("report-sync-state-set"))

    async def report_sync_state_set_changed(self, new_set: frozenset[int]) -> None:
        c = self.config
        assert self.broker_controller_id is not None
        try:
            result = await self.client.alter_sync_state_set(self.controller_leader_address, c.brokerName,
                                                            self.broker_controller_id, self.master_epoch, new_set,
                                                            self.sync_state_set_epoch)
        except Exception as exc:  # noqa: BLE001
            self.log.error("Error happen when change SyncStateSet, broker:{name}, masterAddress:{addr}, "
                           "masterEpoch:{epoch}, oldSyncStateSet:{old}, newSyncStateSet:{new}, syncStateSetEpoch:{sepoch}: "
                           "{err}", name=c.brokerName, addr=self.master_address, epoch=self.master_epoch,
                           old=sorted(self.sync_state_set), new=sorted(new_set), sepoch=self.sync_state_set_epoch,
                           err=_text(exc))
            return
        self.change_sync_state_set(result.syncStateSet, result.syncStateSetEpoch)

    def _heartbeat_job(self) -> None:
        if self.state is State.RUNNING:  # Java: the scheduled heartbeat skips an isolated broker
            self.send_heartbeat_to_controller()

    def send_heartbeat_to_controller(self) -> None:
        c = self.config
        if self.broker_controller_id is None:
            return
        header = BrokerHeartbeatRequestHeader(
            clusterName=c.brokerClusterName, brokerAddr=self.broker_address, brokerName=c.brokerName,
            brokerId=self.broker_controller_id, epoch=self.ha.last_epoch(), maxOffset=self.ha.max_offset(),
            confirmOffset=self.ha.confirm_offset(), heartbeatTimeoutMills=c.controllerHeartBeatTimeoutMills,
            electionPriority=c.brokerElectionPriority)
        for addr in list(self.available):
            d = defer.maybeDeferred(self.client.heartbeat, addr, header)
            d.addErrback(lambda f, a: self.log.warn("Error happen when send heartbeat to controller {addr}: {err}",
                                                    addr=a, err=f.getErrorMessage()), addr)


def _text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def epoch_cache(manager: ReplicasManager) -> EpochEntryCache:
    """GET_BROKER_EPOCH_CACHE's answer (Java ``AdminBrokerProcessor.getBrokerEpochCache``): the
    config's brokerId (0 on the master), the HA side's epochs and the store's max offset."""
    c = manager.config
    entries = [EpochEntry(e.epoch, e.start_offset, e.end_offset) for e in manager.ha.epoch_entries()]
    return EpochEntryCache(c.brokerClusterName, c.brokerName, c.brokerId, entries, manager.ha.max_offset())
