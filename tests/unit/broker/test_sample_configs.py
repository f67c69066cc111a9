"""The sample configurations load, and the four of conf/2m-2s-sync can share one host, as their
comments promise: no two brokers bind the same port (main, fast, HA, gRPC) or use one store."""
from __future__ import annotations

from pathlib import Path

import pytest

from rmqpy.broker.config import load_settings

ROOT = Path(__file__).resolve().parents[3]
TWO_MASTERS_TWO_SLAVES = sorted((ROOT / "conf" / "2m-2s-sync").glob("*.properties"))


def ports_and_store(path: Path) -> tuple[set[int], str]:
    settings = load_settings(str(path))
    listen = settings.netty.listenPort
    ports = {listen, listen - 2, settings.store.haListenPort}
    if settings.broker.grpcServerPort > 0:
        ports.add(settings.broker.grpcServerPort)
    return ports, settings.store.storePathRootDir


def test_four_samples_exist() -> None:
    assert [p.name for p in TWO_MASTERS_TWO_SLAVES] == [
        "broker-a-s.properties", "broker-a.properties", "broker-b-s.properties", "broker-b.properties"]


@pytest.mark.parametrize("default", [ROOT / "conf" / "broker.conf"])
def test_default_broker_conf_loads(default: Path) -> None:
    assert load_settings(str(default)).broker.grpcServerPort == 8081


def test_two_masters_two_slaves_share_one_host() -> None:
    seen_ports: dict[int, str] = {}
    seen_stores: dict[str, str] = {}
    for path in TWO_MASTERS_TWO_SLAVES:
        ports, store = ports_and_store(path)
        for port in ports:
            assert port not in seen_ports, f"{path.name} and {seen_ports[port]} both bind {port}"
            seen_ports[port] = path.name
        assert store not in seen_stores, f"{path.name} and {seen_stores[store]} share {store}"
        seen_stores[store] = path.name
