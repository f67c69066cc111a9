"""Plain ACL: signatures, address patterns, the rules of the YAML files, and the broker's checks."""
from __future__ import annotations

import base64
import hashlib
import hmac
import textwrap

import pytest

from rmqpy.acl import address, signature
from rmqpy.acl.permission import AclError
from rmqpy.acl.plain import load_rules
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.admin import CreateTopicRequestHeader
from tests.unit.broker.helpers import FakeChannel, call, make_broker, pull_request, send_request

ACL_YML = textwrap.dedent("""\
    globalWhiteRemoteAddresses:
      - 10.10.103.*
    accounts:
      - accessKey: RocketMQ
        secretKey: 12345678
        whiteRemoteAddress:
        admin: false
        defaultTopicPerm: DENY
        defaultGroupPerm: SUB
        topicPerms:
          - topicA=DENY
          - topicB=PUB|SUB
          - topicC=SUB
        groupPerms:
          - groupA=DENY
          - groupB=PUB|SUB
      - accessKey: rocketmq2
        secretKey: 12345678
        whiteRemoteAddress: 192.168.1.*
        admin: true
    """)


def test_content_is_sorted_values_then_body_without_signature():
    ext = {"b": "2", "a": "1", "Signature": "x", "AccessKey": "ak"}
    assert signature.content(ext, b"BODY") == b"ak12BODY"  # "AccessKey" < "a" < "b" (upper case first)
    expected = base64.b64encode(hmac.new(b"secret", b"ak12BODY", hashlib.sha1).digest()).decode()
    assert signature.calculate(b"ak12BODY", "secret") == expected


def test_sign_puts_access_key_token_and_signature():
    ext = {"topic": "T"}
    signature.sign(ext, None, "akakak1", "skskskk", "tok")
    assert ext["AccessKey"] == "akakak1" and ext["SecurityToken"] == "tok"
    assert ext["Signature"] == signature.calculate(b"akakak1tokT", "skskskk")


@pytest.mark.parametrize("pattern,yes,no", [
    ("*", ["1.2.3.4", "::1"], []),
    ("", [], ["1.2.3.4"]),
    ("192.168.0.1", ["192.168.0.1"], ["192.168.0.2"]),
    ("192.168.0.1,192.168.0.2", ["192.168.0.2"], ["192.168.0.3"]),
    ("192.168.1.{1,2}", ["192.168.1.2"], ["192.168.1.3"]),
    ("10.10.103.*", ["10.10.103.7"], ["10.10.104.7"]),
    ("10.10.103.1-200", ["10.10.103.200"], ["10.10.103.201"]),
    ("192.168.*.*", ["192.168.44.1"], ["192.169.0.1"]),
    ("2001:db8:0:0:0:0:0:1-ff", ["2001:db8::ff"], ["2001:db8::100"]),
])
def test_address_patterns(pattern, yes, no):
    m = address.matcher(pattern)
    assert all(m(a) for a in yes) and not any(m(a) for a in no)


@pytest.mark.parametrize("pattern", ["192.168.1", "300.1.1.1", "192.*", "10.10.103.9-2", "a.b.c.{1,x}"])
def test_bad_address_patterns_are_errors(pattern):
    with pytest.raises(AclError):
        address.matcher(pattern)


@pytest.mark.parametrize("text", [
    "accounts:\n  - accessKey: short\n    secretKey: 12345678\n",
    "accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    topicPerms: [topicA=ALL]\n",
    "accounts: [1, 2\n",
    "- a\n- b\n",
])
def test_broken_files_raise(text):
    with pytest.raises(AclError):
        load_rules([("f.yml", text.encode())])


def test_secret_never_in_error():
    with pytest.raises(AclError) as info:
        load_rules([("f.yml", b"accounts:\n  - accessKey: RocketMQ\n    secretKey: sec\n")])
    assert "sec\n" not in str(info.value) and "secretKey=sec" not in str(info.value)


# ---------------------------------------------------------------- the broker


@pytest.fixture
def broker_overrides(tmp_path):
    """Plain ACL on, with this module's plain_acl.yml in the broker's home."""
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(ACL_YML)
    return {"aclEnable": True, "rocketmqHome": str(home)}


def signed(request: RemotingCommand, ak="RocketMQ", sk="12345678") -> RemotingCommand:
    fields = dict(request.ext_fields or {})
    signature.sign(fields, request.body, ak, sk)
    request.ext_fields = fields
    return request


def create_topic(topic: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, CreateTopicRequestHeader(
        topic=topic, defaultTopic="TBW102", readQueueNums=1, writeQueueNums=1, perm=6,
        topicFilterType="SINGLE_TAG", topicSysFlag=0, order=False))


def test_send_permissions(broker):
    ch = FakeChannel()
    assert call(broker, ch, signed(send_request("topicB"))).code == ResponseCode.SUCCESS
    denied = call(broker, ch, signed(send_request("topicA")))
    assert denied.code == ResponseCode.SYSTEM_ERROR
    assert denied.remark.startswith("org.apache.rocketmq.acl.common.AclException: No default permission for "
                                    "topic:topicA, org.apache.rocketmq.acl.plain.PlainPermissionManager.checkPerm(")
    assert call(broker, ch, signed(send_request("topicC"))).code == ResponseCode.SYSTEM_ERROR  # SUB only
    assert call(broker, ch, signed(send_request("other"))).code == ResponseCode.SYSTEM_ERROR  # default DENY


def test_unsigned_wrong_key_and_wrong_signature(broker):
    ch = FakeChannel()
    assert "No accessKey is configured" in call(broker, ch, send_request("topicB")).remark
    assert "No acl config for nobody12" in call(broker, ch, signed(send_request("topicB"), ak="nobody12")).remark
    bad = call(broker, ch, signed(send_request("topicB"), sk="wrongwrong"))
    assert bad.code == ResponseCode.SYSTEM_ERROR and "Check signature failed for accessKey=RocketMQ" in bad.remark
    req = signed(send_request("topicB"))
    req.body = b"tampered"
    assert "Check signature failed" in call(broker, ch, req).remark


def test_pull_checks_topic_and_group(broker):
    ch = FakeChannel()
    ok = call(broker, ch, signed(pull_request("topicB", "groupB", suspend_ms=0, sys_flag=0)))
    assert ok is None or ok.code != ResponseCode.SYSTEM_ERROR
    assert "group:groupA" in call(broker, ch, signed(pull_request("topicB", "groupA"))).remark
    assert "topic:topicA" in call(broker, ch, signed(pull_request("topicA", "groupB"))).remark


def test_admin_codes_need_admin(broker):
    ch = FakeChannel()
    denied = call(broker, ch, signed(create_topic("NewT")))
    assert "Need admin permission for request code=17, but accessKey=RocketMQ is not" in denied.remark
    # rocketmq2 is admin, white-listed for 192.168.1.* only but its signature works from anywhere
    assert call(broker, ch, signed(create_topic("NewT"), ak="rocketmq2")).code == ResponseCode.SUCCESS


def test_white_addresses(broker):
    assert call(broker, FakeChannel("10.10.103.5"), create_topic("W1")).code == ResponseCode.SUCCESS  # global
    unsigned = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, None,
                                       ext_fields={**create_topic("W2").ext_fields, "AccessKey": "rocketmq2"})
    assert call(broker, FakeChannel("192.168.1.9"), unsigned).code == ResponseCode.SUCCESS  # account's
    assert call(broker, FakeChannel("192.168.2.9"), unsigned).code == ResponseCode.SYSTEM_ERROR


def test_denials_are_logged_once_per_key_and_code(broker):
    from twisted.logger import globalLogPublisher
    seen = []
    globalLogPublisher.addObserver(seen.append)
    try:
        ch = FakeChannel()
        for _ in range(5):
            call(broker, ch, signed(send_request("topicA")))
            call(broker, ch, signed(send_request("topicA"), sk="wrongwrong"))
    finally:
        globalLogPublisher.removeObserver(seen.append)
    lines = [e for e in seen if e.get("log_namespace", "").startswith("rmqpy.acl")]
    assert len(lines) == 1  # one (RocketMQ, SEND_MESSAGE_V2) slot
    assert "12345678" not in repr(lines) and "wrongwrong" not in repr(lines)


def acl_events(seen, level=None):
    return [e for e in seen if e.get("log_namespace", "").startswith("rmqpy.acl")
            and (level is None or e["log_level"].name == level)]


def test_hot_reload_validated_before_swap(broker, tmp_path):
    from twisted.logger import globalLogPublisher
    clock = broker.reactor
    path = tmp_path / "home" / "conf" / "plain_acl.yml"
    ch = FakeChannel()
    assert call(broker, ch, signed(send_request("topicA"))).code == ResponseCode.SYSTEM_ERROR
    seen = []
    globalLogPublisher.addObserver(seen.append)
    try:
        path.write_text(ACL_YML.replace("topicA=DENY", "topicA=PUB"))
        clock.advance(0.5)
        assert call(broker, ch, signed(send_request("topicA"))).code == ResponseCode.SUCCESS
        for broken in ("accounts: [\n", "accounts:\n  - accessKey: RocketMQ\n    secretKey: short\n"):
            path.write_text(broken)
            for _ in range(4):  # one error per broken state, however often it is looked at
                clock.advance(0.5)
            assert call(broker, ch, signed(send_request("topicA"))).code == ResponseCode.SUCCESS  # kept
        errors = acl_events(seen, "error")
        assert len(errors) == 2 and all("keeping the previous rules" in e["log_format"] for e in errors)
        assert "short" not in repr(errors)
        # a second file in conf/acl counts too
        (tmp_path / "home" / "conf" / "acl").mkdir()
        (tmp_path / "home" / "conf" / "acl" / "more.yml").write_text(
            "accounts:\n  - accessKey: another1\n    secretKey: another1secret\n    defaultTopicPerm: PUB\n")
        path.write_text(ACL_YML)
        clock.advance(0.5)
        assert call(broker, ch, signed(send_request("topicA"))).code == ResponseCode.SYSTEM_ERROR
        assert call(broker, ch, signed(send_request("topicZ"), "another1", "another1secret")).code == ResponseCode.SUCCESS
    finally:
        globalLogPublisher.removeObserver(seen.append)


def test_broken_file_at_start_is_an_error(tmp_path):
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text("globalWhiteRemoteAddresses: ['300.1.1.1']\n")
    with pytest.raises(AclError, match="300.1.1.1"):
        make_broker(tmp_path, aclEnable=True, rocketmqHome=str(home))


def test_acl_needs_a_home(tmp_path):
    with pytest.raises(AclError, match="rocketmqHome"):
        make_broker(tmp_path, aclEnable=True, rocketmqHome=None)


def acl_admin(code, **fields):
    return signed(RemotingCommand.request(code, None, ext_fields={k: str(v) for k, v in fields.items()}),
                  "rocketmq2", "12345678")


def test_acl_admin_codes_write_yaml(broker, tmp_path):
    import yaml

    from rmqpy.protocol import fastjson
    ch = FakeChannel()
    path = tmp_path / "home" / "conf" / "plain_acl.yml"
    r = call(broker, ch, acl_admin(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, accessKey="newuser1",
                                   secretKey="newsecret1", admin="false", defaultTopicPerm="DENY",
                                   topicPerms="topicA=PUB,topicC=PUB|SUB"))
    assert r.code == ResponseCode.SUCCESS, r.remark
    doc = yaml.safe_load(path.read_text())
    assert doc["accounts"][-1] == {"accessKey": "newuser1", "secretKey": "newsecret1", "admin": False,
                                   "defaultTopicPerm": "DENY", "topicPerms": ["topicA=PUB", "topicC=PUB|SUB"]}
    assert doc["dataVersion"][0]["counter"] == 1
    assert call(broker, ch, signed(send_request("topicA"), "newuser1", "newsecret1")).code == ResponseCode.SUCCESS
    # a bad change writes nothing
    before = path.read_text()
    r = call(broker, ch, acl_admin(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, accessKey="newuser1",
                                   secretKey="newsecret1", topicPerms="topicA=ALL"))
    assert r.code == 209 and path.read_text() == before
    r = call(broker, ch, acl_admin(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, globalWhiteAddrs="1.2.3.4,5.6.7.*",
                                   aclFileFullPath="/etc/passwd"))
    assert r.code == 211 and path.read_text() == before
    r = call(broker, ch, acl_admin(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, globalWhiteAddrs="1.2.3.4,5.6.7.*",
                                   aclFileFullPath=str(path)))
    assert r.code == ResponseCode.SUCCESS
    assert yaml.safe_load(path.read_text())["globalWhiteRemoteAddresses"] == ["1.2.3.4", "5.6.7.*"]
    info = call(broker, ch, acl_admin(RequestCode.GET_BROKER_CLUSTER_ACL_INFO))
    assert fastjson.loads(info.ext_fields["version"])["counter"] == 2
    assert info.ext_fields["brokerName"] == "broker-a"
    body = fastjson.loads(call(broker, ch, acl_admin(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)).body)
    assert body["globalWhiteAddrs"] == ["1.2.3.4", "5.6.7.*"]
    assert [a["accessKey"] for a in body["plainAccessConfigs"]] == ["RocketMQ", "rocketmq2", "newuser1"]
    assert call(broker, ch, acl_admin(RequestCode.DELETE_ACL_CONFIG, accessKey="newuser1")).code == ResponseCode.SUCCESS
    assert call(broker, ch, acl_admin(RequestCode.DELETE_ACL_CONFIG, accessKey="newuser1")).code == 210
    assert "No acl config for newuser1" in call(broker, ch, signed(send_request("topicA"), "newuser1", "newsecret1")).remark
    # not for non-admin accounts
    r = call(broker, ch, signed(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, None)))
    assert "Need admin permission for request code=54" in r.remark


def test_outgoing_requests_are_signed_with_inner_credentials(tmp_path):
    from twisted.internet import defer

    from rmqpy.protocol.headers.namesrv import UnRegisterBrokerRequestHeader

    class Pending:
        def connect(self, factory):
            return defer.Deferred()

    b, clock = make_broker(tmp_path, innerClientAuthenticationCredentials='{"accessKey":"rocketmq2","secretKey":"12345678"}')
    try:
        b.namesrv_client.endpoint_factory = lambda r, h, p: Pending()
        req = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, UnRegisterBrokerRequestHeader(
            brokerName="b", brokerAddr="1.2.3.4:1", clusterName="c", brokerId=0))
        b.namesrv_client.invoke("127.0.0.1:9876", req)
        ext = req.ext_fields
        assert ext["AccessKey"] == "rocketmq2"
        assert ext["Signature"] == signature.calculate(signature.content(ext, None), "12345678")
        config = call(b, FakeChannel(), RemotingCommand.request(RequestCode.GET_BROKER_CONFIG, None)).body.decode()
        assert "innerClientAuthenticationCredentials=******" in config and "12345678" not in config
    finally:
        b.shutdown()


def test_bad_inner_credentials_are_an_error(tmp_path):
    with pytest.raises(AclError, match="innerClientAuthenticationCredentials"):
        make_broker(tmp_path, innerClientAuthenticationCredentials='{"accessKey":"x"}')


@pytest.mark.parametrize("host,warned", [("0.0.0.0", True), ("127.0.0.1", False), ("::1", False)])
def test_warning_when_open_beyond_loopback(tmp_path, host, warned):
    from twisted.logger import globalLogPublisher
    seen = []
    globalLogPublisher.addObserver(seen.append)
    try:
        b, _ = make_broker(tmp_path, bindAddress=host)
        b.shutdown()
    finally:
        globalLogPublisher.removeObserver(seen.append)
    lines = [e for e in seen if "without access control" in (e.get("log_format") or "")]
    assert len(lines) == (1 if warned else 0)
