"""A running broker switches role master -> slave -> master and runs exactly the final role's services."""
from __future__ import annotations

from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.store.role import BrokerRole, RoleState
from tests.unit.broker.helpers import FakeChannel, call, send_request

MASTER_SERVICES = ["schedule", "transaction-check", "timer-delivery", "pop-revive", "master-slave-diff"]
SLAVE_SERVICES = ["slave-sync", "timer-checkpoint-sync"]


def running(broker) -> dict[str, bool]:
    return {"schedule": broker.schedule_message_service.started,
            "transaction-check": broker.transactional_message_service.started,
            "timer-delivery": broker.timer_message_service.started,
            "pop-revive": broker.pop_revive_service._loop is not None,
            "ha-client": broker.replication.client is not None,
            "ha-master-wakeup": broker.replication.service.wakeup_all in broker.message_store.arrive_listeners}


def assert_master(broker) -> None:
    assert broker.role == RoleState(BrokerRole.ASYNC_MASTER, 0)
    assert broker.role_services.names() == MASTER_SERVICES
    assert all(child.running for child in broker.role_services)
    assert running(broker) == {"schedule": True, "transaction-check": True, "timer-delivery": True,
                               "pop-revive": True, "ha-client": False, "ha-master-wakeup": True}


def test_master_slave_master(clocked_broker) -> None:
    broker, clock = clocked_broker
    clock.advance(11)
    assert_master(broker)
    assert call(broker, FakeChannel(), send_request("T")).code == ResponseCode.SUCCESS

    broker.switch_role(BrokerRole.SLAVE)
    assert broker.role == RoleState(BrokerRole.SLAVE, 1)  # Java changeToSlave: id 0 becomes 1
    assert broker.role_services.names() == SLAVE_SERVICES
    assert running(broker) == {"schedule": False, "transaction-check": False, "timer-delivery": False,
                               "pop-revive": False, "ha-client": True, "ha-master-wakeup": False}
    assert broker.message_store.replica_wait is None
    assert call(broker, FakeChannel(), send_request("T")).code != ResponseCode.SUCCESS  # a slave refuses puts
    clock.advance(61)

    broker.switch_role(BrokerRole.ASYNC_MASTER)
    assert_master(broker)
    assert broker.slave_synchronize.master_addr is None
    assert call(broker, FakeChannel(), send_request("T")).code == ResponseCode.SUCCESS
    clock.advance(61)


def test_sync_master_waits_for_the_slave(broker) -> None:
    broker.switch_role(BrokerRole.SYNC_MASTER)
    assert broker.message_store.replica_wait == broker.replication.service.replica_wait
    broker.switch_role(BrokerRole.ASYNC_MASTER)
    assert broker.message_store.replica_wait is None


def test_update_broker_config_switches_the_role(broker, tmp_path) -> None:
    broker.settings.config_file = str(tmp_path / "broker.conf")

    def update(body: bytes) -> RemotingCommand:
        return call(broker, FakeChannel(), RemotingCommand.request(RequestCode.UPDATE_BROKER_CONFIG, body=body))

    assert update(b"brokerRole=SLAVE\nbrokerId=2\n").code == ResponseCode.SUCCESS
    assert broker.role == RoleState(BrokerRole.SLAVE, 2)
    assert broker.role_services.names() == SLAVE_SERVICES and running(broker)["ha-client"]
    assert update(b"brokerRole=ASYNC_MASTER\n").code == ResponseCode.SUCCESS
    assert_master(broker)
