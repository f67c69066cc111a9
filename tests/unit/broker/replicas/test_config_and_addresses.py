"""Controller mode's keys at start, and the list of controller addresses."""
from __future__ import annotations

import pytest

from rmqpy.broker.config import load_settings
from rmqpy.broker.replicas.client import controller_addresses
from rmqpy.common.properties import PropertiesError


def _conf(tmp_path, text: str) -> str:
    path = tmp_path / "broker.conf"
    path.write_text(text)
    return str(path)


def test_controller_mode_keeps_the_configured_id_and_needs_controller_addr(tmp_path) -> None:
    # a classic broker: a master's id is forced to 0, a slave's must be > 0
    classic = load_settings(_conf(tmp_path, "brokerRole=ASYNC_MASTER\nbrokerId=3\n"))
    assert classic.broker.brokerId == 0
    with pytest.raises(PropertiesError, match="brokerId must be > 0"):
        load_settings(_conf(tmp_path, "brokerRole=SLAVE\nbrokerId=0\n"))
    # controller mode: the controller gives the id and the role (BrokerStartup skips both rules)
    s = load_settings(_conf(tmp_path, "enableControllerMode=true\ncontrollerAddr=127.0.0.1:9878\n"
                                      "brokerRole=SLAVE\nbrokerId=0\n"))
    assert s.broker.enableControllerMode and s.broker.brokerId == 0
    assert (s.broker.syncBrokerMetadataPeriod, s.broker.checkSyncStateSetPeriod, s.broker.syncControllerMetadataPeriod,
            s.broker.controllerHeartBeatTimeoutMills, s.broker.brokerHeartbeatInterval) == (5000, 5000, 10000, 10000, 1000)
    assert (s.store.allAckInSyncStateSet, s.store.minInSyncReplicas) == (False, 1)
    with pytest.raises(PropertiesError, match="needs controllerAddr"):
        load_settings(_conf(tmp_path, "enableControllerMode=true\n"))


def test_controller_addresses_split_or_looked_up() -> None:
    assert controller_addresses(" 10.0.0.1:9878; 10.0.0.2:9878;", False) == ["10.0.0.1:9878", "10.0.0.2:9878"]
    assert controller_addresses("ctl.example:9878", True, lambda host: ["10.0.0.1", "10.0.0.2"]) == [
        "10.0.0.1:9878", "10.0.0.2:9878"]

    def unknown(host: str) -> list[str]:
        raise OSError("no such host")

    assert controller_addresses("ctl.example:9878", True, unknown) == []
