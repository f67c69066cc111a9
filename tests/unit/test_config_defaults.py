"""rmqpy's defaults are Java 5.3.3's, or an exception with its reason (issue 33); each change 5.5.1 makes
to a 5.3.3 default says which of the two rmqpy keeps, and rmqpy keeps it.

The Java side is what ``BrokerStartup -p`` / ``NamesrvStartup -p`` 5.3.3 print
(rmqpy/tools/java_defaults/*.properties) and, for the gRPC keys rmqpy keeps in its broker
config, ProxyConfig's initialisers (java_defaults/initialisers.json); 5.5.1's are the initialisers
read from its sources jars. docs/configuration.md is generated from the same tables;
tests/unit/test_docs.py checks it is current.
"""
from __future__ import annotations

from rmqpy.broker.java_config import JAVA_5_3_3
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


def test_the_releases_table_has_a_5_5_1_column_read_from_its_sources_jars() -> None:
    assert ct.RELEASES == ("4.9.7", "5.3.3", "5.5.1")
    refs = ct.initialisers()["refs"]
    assert set(refs) == set(ct.RELEASES)
    assert refs["5.5.1"]["version"] == "5.5.1" and "rocketmq-common-5.5.1-sources.jar" in refs["5.5.1"]["jars"]
    assert all(len(sha1) == 40 for sha1 in refs["5.5.1"]["jars"].values())
    classes = ct.initialisers()["classes"]
    for cls in ("BrokerConfig", "BrokerIdentity", "MessageStoreConfig", "NettyServerConfig", "NettyClientConfig",
                "NamesrvConfig"):
        assert len(classes[cls]["5.5.1"]) >= len(classes[cls]["5.3.3"]), cls  # read, and nothing lost
    broker = ct.differing_defaults("broker")
    assert broker["transactionMetricFlushInterval"] == [None, "3000", "10000"]
    assert broker["registerBrokerTimeoutMills"] == ["6000", "24000", "24000"]
    assert ct.release_defaults("broker")["5.5.1"]["maxTopicLength"] == "127"
    # ProxyConfig 5.5.1 was not read (no rocketmq-proxy 5.5.1 sources jar): unknown, not absent
    assert ct.unread_classes("5.5.1") == ["ProxyConfig"] and ct.unread_classes("5.3.3") == []
    assert ct.is_read("broker", "5.5.1") and ct.is_read("namesrv", "5.5.1")
    assert not ct.is_read("gRPC (ProxyConfig)", "5.5.1")
    assert "| key | 4.9.7 | 5.3.3 | 5.5.1 | rmqpy | why |" in ct.render()


def test_every_5_5_1_change_of_a_5_3_3_default_says_what_rmqpy_does() -> None:
    changed = ct.changed_to_next()
    assert set(changed) == set(ct.FROM_JAVA_TO_NEXT), "FROM_JAVA_TO_NEXT must list exactly the keys 5.5.1 changed"
    ours = ct.rmqpy_defaults()
    for key, (server, old, new) in changed.items():
        keeps, why = ct.FROM_JAVA_TO_NEXT[key]
        assert keeps in (ct.JAVA_VERSION, ct.NEXT_VERSION) and len(why) > 20, key
        expected = old if keeps == ct.JAVA_VERSION else new
        mine = ours["namesrv" if server == "namesrv" else "broker"]
        if key in mine:
            assert mine[key] == expected, f"{key}: rmqpy's default {mine[key]} is not {keeps}'s {expected}"
        elif server == "broker":   # no setting: what GET_BROKER_CONFIG prints to 5.x clients
            shown = JAVA_5_3_3.get(key)
            assert shown == expected or callable(shown), f"{key}: getBrokerConfig shows {shown}, not {keeps}'s {expected}"
    assert changed["transactionMetricFlushInterval"] == ("broker", "3000", "10000")


def test_keys_new_in_5_5_1_that_rmqpy_has_take_5_5_1s_default_or_an_exception() -> None:
    new, ours = ct.new_in_next(), ct.rmqpy_defaults()
    for key, (server, _cls, value) in new.items():
        mine = ours["namesrv" if server == "namesrv" else "broker"]
        if key in mine and key not in _HOST:
            assert mine[key] == value or key in ct.EXCEPTIONS, f"{key}: rmqpy {mine[key]}, Java 5.5.1 {value}"
    assert new["enableSplitMetadata"] == ("broker", "BrokerConfig", "true")
    assert new["timerRocksDBEnable"] == ("broker", "MessageStoreConfig", "false")
    text = ct.render()
    assert "### New in 5.5.1, unknown to rmqpy" in text
    assert "| `enableSplitMetadata` | broker | BrokerConfig | `true` |" in text
