"""5.x authentication/authorization: policy matching, Java's entry order, persistence, and the
broker's answers through its dispatcher (interop proof: tests/interop/test_auth5_java.py)."""
from __future__ import annotations

import json
import os

import pytest

from rmqpy.acl import signature
from rmqpy.auth import contexts
from rmqpy.auth.metadata import AuthMetadata
from rmqpy.auth.model import Acl, AuthError, Policy, PolicyEntry, Resource, User, acl_from_info, ip_in_range
from rmqpy.auth.pipeline import decide, java_sorted_first
from rmqpy.broker.processor.auth_admin import AUTH_CREATE_ACL, AUTH_CREATE_USER, AUTH_GET_ACL, AUTH_LIST_USER
from rmqpy.common.properties import PropertiesError
from rmqpy.protocol import fastjson
from rmqpy.protocol.codes import ResponseCode
from rmqpy.protocol.command import RemotingCommand
from tests.unit.broker.helpers import FakeChannel, call, make_broker, pull_request, send_request


def entry(key: str, actions=("Pub",), decision="Allow", ips=()) -> PolicyEntry:
    r = Resource.parse(key)
    assert r is not None
    return PolicyEntry(r, list(actions), list(ips), decision)


# ---------------------------------------------------------------- resources and entries

def test_resource_keys_and_patterns():
    assert Resource.parse("*") == Resource("Any", None, "ANY")
    assert Resource.parse("topic:*") == Resource("Topic", None, "ANY")
    assert Resource.parse("Topic:pre*") == Resource("Topic", "pre", "PREFIXED")
    assert Resource.parse("Group:g1") == Resource("Group", "g1", "LITERAL")
    assert Resource.parse("Queue:q") is None and Resource.parse("  ") is None
    assert [Resource.parse(k).key for k in ("*", "Topic:*", "Topic:pre*", "Cluster:c")] == \
        ["*", "Topic:*", "Topic:pre*", "Cluster:c"]
    assert Resource.group("%RETRY%g1") == Resource("Group", "g1", "LITERAL")
    assert Resource.topic(None).key == "Topic:null"


@pytest.mark.parametrize("key,wanted,match", [
    ("*", Resource.group("g"), True), ("Topic:*", Resource.topic("t"), True),
    ("Topic:*", Resource.group("t"), False), ("Topic:t", Resource.topic("t"), True),
    ("Topic:t", Resource.topic("t2"), False), ("Topic:t*", Resource.topic("t2"), True),
    ("Topic:t*", Resource.topic("x"), False),
])
def test_resource_match(key, wanted, match):
    assert Resource.parse(key).matches(wanted) is match


def test_actions_and_source_ips():
    e = entry("Topic:t", ("Pub",), ips=("10.0.0.0/8", "192.168.1.5"))
    assert e.matches(Resource.topic("t"), ("Pub",), "10.1.2.3")
    assert e.matches(Resource.topic("t"), ("Pub", "Sub", "Get"), "192.168.1.5")  # any action of the request
    assert not e.matches(Resource.topic("t"), ("Sub",), "10.1.2.3")
    assert not e.matches(Resource.topic("t"), ("Pub",), "11.1.2.3")
    assert entry("Topic:t", ("All",)).matches(Resource.topic("t"), ("Delete",), "1.2.3.4")
    assert ip_in_range("::1", "::1/128") and not ip_in_range("bad", "10.0.0.0/8")


def test_decide_custom_before_default_and_deny():
    need = contexts.Need(Resource.topic("t"), ("Pub",))
    assert decide(None, need, "1.1.1.1") == "no matched policies."
    acl = Acl("User:a", [Policy("Default", [entry("Topic:*")])])
    assert decide(acl, need, "1.1.1.1") is None
    acl.policies.append(Policy("Custom", [entry("Topic:t", decision="Deny")]))
    assert decide(acl, need, "1.1.1.1") == "the decision is deny."  # Custom matched: Default not read
    acl = Acl("User:a", [Policy("Custom", [entry("Topic:x")])])
    assert decide(acl, need, "1.1.1.1") == "no matched policies."


def test_java_entry_order():
    """Java's comparator: '*' after any typed resource; a literal and a prefixed entry compare by
    the first argument, so of the two the later entry decides, as in Java; the shorter prefix first."""
    star_deny, literal_allow = entry("*", decision="Deny"), entry("Topic:t")
    assert java_sorted_first([star_deny, literal_allow]) is literal_allow
    assert java_sorted_first([literal_allow, star_deny]) is literal_allow
    prefixed, literal = entry("Topic:t*", decision="Deny"), entry("Topic:tt")
    assert java_sorted_first([literal, prefixed]) is prefixed
    assert java_sorted_first([prefixed, literal]) is literal
    short, long_ = entry("Topic:t*"), entry("Topic:tt*", decision="Deny")
    assert java_sorted_first([long_, short]) is short  # the shorter prefix sorts first
    any_deny, lit_allow = entry("Topic:*", decision="Deny"), entry("Topic:t")
    assert java_sorted_first([any_deny, lit_allow]) is lit_allow


# ---------------------------------------------------------------- what requests need

def test_needs_of_sends_pulls_and_annotated_codes():
    send = send_request("t1")
    send.ext_fields = {**send.ext_fields, "AccessKey": "a"}
    assert contexts.needs(send, "C") == [contexts.Need(Resource.topic("t1"), ("Pub",))]
    retry = RemotingCommand.request(10, None)
    retry.ext_fields = {"topic": "%RETRY%g1", "group": "g1"}
    assert contexts.needs(retry, "C") == [contexts.Need(Resource.group("g1"), ("Sub",))]
    pull = pull_request("t1", "g1")
    assert [n.resource.key for n in contexts.needs(pull, "C")] == ["Topic:t1", "Group:g1"]
    admin = RemotingCommand.request(AUTH_LIST_USER, None)
    admin.ext_fields = {"AccessKey": "a"}
    assert contexts.needs(admin, "DefaultCluster") == [contexts.Need(Resource.cluster("DefaultCluster"), ("Get",))]
    offsets = RemotingCommand.request(308, None)
    offsets.ext_fields = {"filterGroups": "g1,g2", "compareGroup": "g3", "topic": "t"}
    assert [n.resource.key for n in contexts.needs(offsets, "C")] == ["Group:g1", "Group:g2", "Group:g3", "Topic:t"]
    unknown = RemotingCommand.request(26, None)  # GET_BROKER_CONFIG: no annotated header
    unknown.ext_fields = {"AccessKey": "a"}
    assert contexts.needs(unknown, "C") == []


def test_bad_heartbeat_body_is_a_parse_error():
    hb = RemotingCommand.request(34, None, b"[1, 2")
    hb.ext_fields = {"AccessKey": "a"}
    with pytest.raises(ValueError):
        contexts.needs(hb, "C")


# ---------------------------------------------------------------- persistence

def test_users_and_acls_persist_atomically(tmp_path):
    meta = AuthMetadata(str(tmp_path))
    meta.init_users('{"username":"root","password":"rootpw12"}', '{"accessKey":"inner","secretKey":"innerpw1"}')
    meta.create_user(User("alice", "alicepw1"))
    meta.create_or_update_acl(acl_from_info({"subject": "User:alice", "policies": [
        {"entries": [{"resource": "Topic:t", "actions": ["Pub", "nonsense"], "decision": "allow"}]}]}))
    meta.create_or_update_acl(acl_from_info({"subject": "User:alice", "policies": [
        {"entries": [{"resource": "Topic:t", "actions": ["Sub"], "decision": "Deny", "sourceIps": ["10.0.0.0/8"]},
                     {"resource": "Group:g*", "actions": ["Sub"], "decision": "Allow"}]}]}))
    assert oct(os.stat(meta.path).st_mode & 0o777) == "0o600"
    again = AuthMetadata(str(tmp_path))
    again.load()
    assert {u: (x.userType, x.userStatus) for u, x in again.users.items()} == {
        "root": ("Super", "enable"), "inner": ("Super", "enable"), "alice": ("Normal", "enable")}
    assert again.acls["User:alice"].to_info() == {"subject": "User:alice", "policies": [{"policyType": "Custom", "entries": [
        {"resource": "Topic:t", "actions": ["Sub"], "sourceIps": ["10.0.0.0/8"], "decision": "Deny"},
        {"resource": "Group:g*", "actions": ["Sub"], "decision": "Allow"}]}]}
    again.delete_acl("User:alice", None, Resource.parse("Topic:t"))
    again.delete_user("alice")
    third = AuthMetadata(str(tmp_path))
    third.load()
    assert "alice" not in third.users and third.acls == {}
    assert not os.path.exists(meta.path + ".tmp")


@pytest.mark.parametrize("info,message", [
    ({"subject": "User:ghost", "policies": [{"entries": [{"resource": "Topic:t", "actions": ["Pub"],
                                                          "decision": "Allow"}]}]}, "The subject of User:ghost is not exist."),
    ({"subject": "User:a", "policies": [{"entries": [{"resource": "Queue:t", "actions": ["Pub"],
                                                      "decision": "Allow"}]}]}, "The resource is null."),
    ({"subject": "User:a", "policies": [{"entries": [{"resource": "Topic:t", "actions": ["Any"],
                                                      "decision": "Allow"}]}]}, "The actions can not be Any."),
    ({"subject": "User:a", "policies": [{"entries": [{"resource": "Topic:t", "actions": ["Pub"],
                                                      "sourceIps": ["1.2.3"], "decision": "Allow"}]}]},
     "The source ip is invalid."),
    ({"subject": "User:a", "policies": [{"entries": [{"resource": "Topic:t", "actions": ["Pub"],
                                                      "decision": "maybe"}]}]}, "The decision is null or illegal."),
])
def test_acl_validation_messages(tmp_path, info, message):
    meta = AuthMetadata(str(tmp_path))
    meta.create_user(User("a", "apassword"))
    with pytest.raises(AuthError, match=message.replace(".", r"\.")):
        meta.create_or_update_acl(acl_from_info(info))


def test_broken_file_refuses_to_load(tmp_path):
    (tmp_path / "auth.json").write_text('{"users": [{"password": "x"}]}')
    with pytest.raises(ValueError, match="without a username"):
        AuthMetadata(str(tmp_path)).load()


# ---------------------------------------------------------------- the broker

def signed(request: RemotingCommand, ak: str, sk: str) -> RemotingCommand:
    fields = dict(request.ext_fields or {})
    signature.sign(fields, request.body, ak, sk)
    request.ext_fields = fields
    return request


def admin_request(code: int, ext: dict, body: dict | None) -> RemotingCommand:
    r = RemotingCommand.request(code, None, fastjson.dumps(body).encode() if body is not None else b"")
    r.ext_fields = dict(ext)
    return r


@pytest.fixture
def broker_overrides():
    """5.x authentication and authorization on, with a root user."""
    return {"authenticationEnabled": True, "authorizationEnabled": True,
            "initAuthenticationUser": '{"username":"root","password":"rootpw12"}'}


def test_broker_authenticates_authorizes_and_manages(broker, tmp_path):
    ch = FakeChannel("10.1.2.3")
    assert call(broker, ch, send_request("t1")).remark == "username cannot be null."
    assert call(broker, ch, signed(send_request("t1"), "root", "wrong")).remark == "check signature failed."
    assert call(broker, ch, signed(send_request("t1"), "nobody", "x")).remark == "User:nobody is not found."
    ok = call(broker, ch, admin_request(AUTH_CREATE_USER, {"username": "alice"}, {"password": "alicepw1"}))
    assert ok.code == ResponseCode.NO_PERMISSION  # unsigned: refused before the processor
    r = call(broker, ch, signed(admin_request(AUTH_CREATE_USER, {"username": "alice"}, {"password": "alicepw1"}),
                                "root", "rootpw12"))
    assert r.code == ResponseCode.SUCCESS, r.remark
    denied = call(broker, ch, signed(send_request("t1"), "alice", "alicepw1"))
    assert (denied.code, denied.remark) == (ResponseCode.NO_PERMISSION, "User:alice has no permission to access "
                                            "Topic:t1 from 10.1.2.3, no matched policies.")
    acl = {"subject": "User:alice", "policies": [{"entries": [{"resource": "Topic:t*", "actions": ["Pub"],
                                                               "decision": "Allow", "sourceIps": ["10.0.0.0/8"]}]}]}
    r = call(broker, ch, signed(admin_request(AUTH_CREATE_ACL, {"subject": "User:alice"}, acl), "root", "rootpw12"))
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert call(broker, ch, signed(send_request("t1"), "alice", "alicepw1")).code == ResponseCode.SUCCESS
    assert call(broker, FakeChannel("11.0.0.1"), signed(send_request("t1"), "alice", "alicepw1")).code == \
        ResponseCode.NO_PERMISSION
    # a Normal user may not call the admin codes, nor make a Super user
    r = call(broker, ch, signed(admin_request(AUTH_LIST_USER, {}, None), "alice", "alicepw1"))
    assert r.remark == "User:alice has no permission to access Cluster:DefaultCluster from 10.1.2.3, no matched policies."
    got = call(broker, ch, signed(admin_request(AUTH_GET_ACL, {"subject": "User:alice"}, None), "root", "rootpw12"))
    assert json.loads(got.body) == {"subject": "User:alice", "policies": [{"policyType": "Custom", "entries": [
        {"actions": ["Pub"], "decision": "Allow", "resource": "Topic:t*", "sourceIps": ["10.0.0.0/8"]}]}]}
    stored = json.loads((tmp_path / "store" / "config" / "auth.json").read_text())
    assert [u["username"] for u in stored["users"]] == ["alice", "root"]


@pytest.mark.parametrize("key,value,message", [
    ("authenticationMetadataProvider", "com.example.Mine", "rmqpy has its own provider"),
    ("migrateAuthFromV1Enabled", "true", "not implemented"),
    ("initAuthenticationUser", '{"username":"x"}', "initAuthenticationUser"),
])
def test_config_checks(tmp_path, key, value, message):
    from rmqpy.broker.config import load_settings
    conf = tmp_path / "broker.conf"
    conf.write_text(f"authenticationEnabled=true\n{key}={value}\n")
    with pytest.raises(PropertiesError, match=message):
        load_settings(str(conf))


def test_denials_logged_once_per_account_and_code_without_secrets(broker):
    from twisted.logger import formatEvent, globalLogPublisher
    seen: list[dict] = []
    globalLogPublisher.addObserver(seen.append)
    try:
        ch = FakeChannel("10.1.2.3")
        for _ in range(5):
            assert call(broker, ch, signed(send_request("t1"), "root", "not-the-password")).code == \
                ResponseCode.NO_PERMISSION
        call(broker, ch, signed(pull_request("t1", "g1"), "root", "not-the-password"))
    finally:
        globalLogPublisher.removeObserver(seen.append)
    lines = [formatEvent(e) for e in seen if "denied request code" in (e.get("log_format") or "")]
    assert len(lines) == 2, lines  # one per (account, code): the send and the pull
    assert all("root" in line and "check signature failed." in line for line in lines)
    assert not any("not-the-password" in line or "rootpw12" in line or "Signature" in line for line in lines)


def test_plain_acl_and_5x_together(tmp_path):
    """With aclEnable too, plain ACL checks first (its SYSTEM_ERROR), then 5.x (NO_PERMISSION)."""
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(
        "accounts:\n  - accessKey: RocketMQ\n    secretKey: '12345678'\n    admin: true\n"
        "  - accessKey: rootadmin\n    secretKey: rootpw12\n    admin: true\n")
    b, _ = make_broker(tmp_path, aclEnable=True, rocketmqHome=str(home), authenticationEnabled=True,
                       authorizationEnabled=True, initAuthenticationUser='{"username":"rootadmin","password":"rootpw12"}')
    try:
        ch = FakeChannel()
        r = call(b, ch, signed(send_request("t1"), "RocketMQ", "12345678"))  # plain ACL passes, 5.x refuses
        assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "User:RocketMQ is not found.")
        r = call(b, ch, signed(send_request("t1"), "nobody99", "12345678"))
        assert r.code == ResponseCode.SYSTEM_ERROR and "No acl config for nobody99" in r.remark
        assert call(b, ch, signed(send_request("t1"), "rootadmin", "rootpw12")).code != ResponseCode.NO_PERMISSION
    finally:
        b.shutdown()


def test_authorization_without_authentication_warns(tmp_path):
    from twisted.logger import globalLogPublisher
    seen: list[dict] = []
    globalLogPublisher.addObserver(seen.append)
    try:
        b, _ = make_broker(tmp_path, authorizationEnabled=True,
                           initAuthenticationUser='{"username":"root","password":"rootpw12"}')
        ch = FakeChannel()
        unsigned = send_request("t1")
        unsigned.ext_fields = {**unsigned.ext_fields, "AccessKey": "root"}  # named, not signed: Java lets it pass
        assert call(b, ch, unsigned).code != ResponseCode.NO_PERMISSION
        b.shutdown()
    finally:
        globalLogPublisher.removeObserver(seen.append)
    assert len([e for e in seen if "without authenticationEnabled" in (e.get("log_format") or "")]) == 1
