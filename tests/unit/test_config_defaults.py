"""rmqpy's defaults are Java 5.3.3's, or an exception with its reason (issue 33).

The Java side is what ``BrokerStartup -p`` / ``NamesrvStartup -p`` 5.3.3 print
(rmqpy/tools/java_defaults/*.properties) and, for the gRPC keys rmqpy keeps in its broker
config, ProxyConfig's initialisers (java_defaults/initialisers.json). docs/configuration.md is
generated from the same tables; tests/unit/test_docs.py checks it is current.
"""
from __future__ import annotations

from rmqpy.tools import config_table as ct

#: printed by Java as the capturing host had them; rmqpy prints the same placeholder
_HOST = {"namesrvAddr", "rocketmqHome", "brokerIP1", "brokerIP2", "brokerName"}


def _java_5_3_3() -> dict[str, dict[str, str]]:
    proxy = ct.release_defaults("gRPC (ProxyConfig)")["5.3.3"]
    out = {}
    for server in ("broker", "namesrv"):
        java = {k: ("~" + v[len("/HOME"):] if v.startswith("/HOME") else v) for k, v in ct.java_defaults(server).items()}
        if server == "broker":
            java = {**{k: v for k, v in proxy.items()}, **java}
        out[server] = java
    return out


def _differences() -> dict[str, tuple[str, str]]:
    ours, java = ct.rmqpy_defaults(), _java_5_3_3()
    found = {}
    for server in ("broker", "namesrv"):
        for key, value in ours[server].items():
            if key in java[server] and key not in _HOST and value != java[server][key]:
                found[key] = (value, java[server][key])
    return found


def test_rmqpy_defaults_are_java_5_3_3s_or_a_listed_exception() -> None:
    unexplained = {k: v for k, v in _differences().items() if k not in ct.EXCEPTIONS}
    assert not unexplained, f"(rmqpy, Java 5.3.3) defaults differ without a reason in EXCEPTIONS: {unexplained}"


def test_every_exception_is_still_one_and_says_why() -> None:
    differences = _differences()
    stale = [k for k in ct.EXCEPTIONS if k not in differences]
    assert not stale, f"EXCEPTIONS lists keys whose default is Java 5.3.3's now: {stale}"
    assert all(len(reason) > 20 for reason in ct.EXCEPTIONS.values())


def test_the_releases_table_has_the_keys_known_to_differ() -> None:
    broker = ct.differing_defaults("broker")
    assert broker["transactionCheckInterval"] == ["60000", "30000", "30000"]
    assert broker["registerBrokerTimeoutMills"][:2] == ["6000", "24000"]
    assert "brokerName" not in broker  # host-dependent in every release, the same there
    assert ct.rmqpy_defaults()["broker"]["transactionCheckInterval"] == "30000"
