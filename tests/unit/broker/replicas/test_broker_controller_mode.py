"""A broker with enableControllerMode=true on a task.Clock: fenced until the controller names its
role, then SYNC_MASTER with brokerId 0 through the role switch, serving sends and registering; the
controller's notifications switch it to slave and back."""
from __future__ import annotations

from typing import Any

from twisted.internet import task

from rmqpy.broker.config import BrokerSettings
from rmqpy.broker.controller import BrokerController
from rmqpy.protocol.bodies.controller import SyncStateSet
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.controller import NotifyBrokerRoleChangedRequestHeader
from rmqpy.store.role import BrokerRole, RoleState
from tests.unit.broker.helpers import FakeChannel, call, send_request
from tests.unit.broker.replicas.fake_controller import FakeController
from tests.unit.broker.test_role_switch import MASTER_SERVICES, SLAVE_SERVICES

C1 = "10.0.0.1:9878"


def notify(controller: FakeController, master_id: int, master_addr: str, epoch: int) -> RemotingCommand:
    """The controller's NOTIFY_BROKER_ROLE_CHANGED (oneway) after an election of epoch ``epoch``,
    which ``controller`` now holds (the broker asks it before it acts on the notification)."""
    controller.elected(master_id, master_addr, epoch)
    header = NotifyBrokerRoleChangedRequestHeader(master_addr, epoch, epoch, master_id)
    return RemotingCommand.request(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, header,
                                   SyncStateSet(frozenset({master_id}), epoch).encode(), oneway=True)

NS = "10.0.0.9:9876"


def controller_mode_settings(tmp_path: Any) -> BrokerSettings:
    """broker-a in controller mode under the fake controller C1, its store in ``tmp_path``, small files."""
    settings = BrokerSettings()
    b, s = settings.broker, settings.store
    b.brokerIP1 = b.brokerIP2 = "127.0.0.1"
    b.brokerName, b.namesrvAddr = "broker-a", NS
    b.enableControllerMode, b.controllerAddr = True, C1
    settings.netty.listenPort = 10911
    s.storePathRootDir = str(tmp_path / "store")
    s.mappedFileSizeCommitLog, s.mappedFileSizeConsumeQueue, s.messageIndexEnable = 1024 * 1024, 20 * 1000, False
    return settings


def test_fenced_until_elected_then_a_sync_master_with_id_0(tmp_path) -> None:
    clock = task.Clock()
    clock.advance(1_700_000_000)
    settings = controller_mode_settings(tmp_path)
    controller = FakeController(leader=C1, peers=[C1], down=(C1,))
    broker = BrokerController(settings, clock)
    broker.namesrv_client = controller  # type: ignore[assignment]  # name server and controller in one fake
    broker.initialize()
    broker.start()
    try:
        clock.advance(11)
        # no controller yet: no role's services, puts refused, nothing registered with the name server
        assert broker.role_services.names() == [] and broker.isolated
        assert call(broker, FakeChannel(), send_request("T")).code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert controller.of(RequestCode.REGISTER_BROKER) == []
        controller.down.clear()
        clock.pump([1.0] * 10)
        assert broker.role == RoleState(BrokerRole.SYNC_MASTER, 0) and not broker.isolated
        assert broker.role_services.names() == MASTER_SERVICES
        assert broker.store_config.brokerRole == "SYNC_MASTER"
        assert broker.message_store.replica_wait is None  # no classic slave to wait for
        assert call(broker, FakeChannel(), send_request("T")).code == ResponseCode.SUCCESS
        registered = controller.of(RequestCode.REGISTER_BROKER)
        assert registered and {r.ext_fields["brokerId"] for r in registered} == {"0"}
        assert broker.topic_config_manager.data_version.stateVersion == 1
        assert (tmp_path / "store" / "brokerIdentity").read_text() == "DefaultCluster#broker-a#1"
        epochs = call(broker, FakeChannel(), RemotingCommand.request(RequestCode.GET_BROKER_EPOCH_CACHE))
        assert epochs.code == ResponseCode.SUCCESS and b'"epoch":1' in epochs.body

        # the controller elected another replica (epoch 2): a slave under its controller id, then master again
        controller.name_server["broker-a"][0] = "127.0.0.1:20911"  # the new master registered as brokerId 0
        call(broker, FakeChannel(), notify(controller, 2, "127.0.0.1:20911", 2))
        assert broker.role == RoleState(BrokerRole.SLAVE, 1) and broker.role_services.names() == SLAVE_SERVICES
        assert broker.slave_synchronize.master_addr == "127.0.0.1:20911"
        assert call(broker, FakeChannel(), send_request("T")).code != ResponseCode.SUCCESS
        assert controller.of(RequestCode.REGISTER_BROKER)[-1].ext_fields["brokerId"] == "1"
        call(broker, FakeChannel(), notify(controller, 1, broker.broker_addr, 3))
        assert broker.role == RoleState(BrokerRole.SYNC_MASTER, 0) and broker.role_services.names() == MASTER_SERVICES
        assert broker.slave_synchronize.master_addr is None
        assert call(broker, FakeChannel(), send_request("T")).code == ResponseCode.SUCCESS
        assert broker.topic_config_manager.data_version.stateVersion == 3
    finally:
        stopped = broker.shutdown()
        clock.pump([1.0] * 3)
    assert stopped.called, "the broker's service tree, replicas manager included, stops"


def test_metrics_follow_the_role_the_epoch_and_the_in_sync_set(tmp_path) -> None:
    """rmqpy_broker_role, rmqpy_broker_master_epoch, rmqpy_broker_sync_state_set_{size,epoch} (rmqpy's own:
    Java 5.3.3's broker has none) as an election and a notification change them."""
    from prometheus_client.exposition import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    clock = task.Clock()
    clock.advance(1_700_000_000)
    settings = controller_mode_settings(tmp_path)
    settings.broker.metricsExporterType = "PROM"
    controller = FakeController(leader=C1, peers=[C1])
    broker = BrokerController(settings, clock)
    broker.namesrv_client = controller  # type: ignore[assignment]
    broker.initialize()
    broker.start()

    def scrape() -> dict[str, Any]:
        assert broker.metrics_manager is not None
        text = generate_latest(broker.metrics_manager.registry).decode()
        return {(x.name, x.labels.get("role", "")): x.value for f in text_string_to_metric_families(text)
                for x in f.samples if x.name.startswith("rmqpy_broker_") and x.labels["node_id"] == "broker-a"}
    try:
        clock.pump([1.0] * 10)
        assert scrape() == {("rmqpy_broker_role", "SYNC_MASTER"): 1, ("rmqpy_broker_master_epoch", ""): 1,
                            ("rmqpy_broker_sync_state_set_size", ""): 1, ("rmqpy_broker_sync_state_set_epoch", ""): 1}
        controller.name_server["broker-a"][0] = "127.0.0.1:20911"
        call(broker, FakeChannel(), notify(controller, 2, "127.0.0.1:20911", 2))
        assert scrape() == {("rmqpy_broker_role", "SLAVE"): 1, ("rmqpy_broker_master_epoch", ""): 2,
                            ("rmqpy_broker_sync_state_set_size", ""): 0, ("rmqpy_broker_sync_state_set_epoch", ""): 0}
    finally:
        broker.shutdown()
        clock.pump([1.0] * 3)
