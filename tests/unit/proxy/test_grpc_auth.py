"""5.x authentication and authorization of gRPC calls (rmqpy.proxy.grpc.auth): the signature
check against metadata made by the official Python client 5.1.2's own signing code and against
a signature computed here independently, the resources each call needs, and the refusals
(interop proof: tests/interop/test_grpc_python.py::test_auth5_official_python_client)."""
from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.v5.client.client_configuration import ClientConfiguration, Credentials
from rocketmq.v5.util.signature import Signature
from twisted.internet.task import Clock

from rmqpy.acl.validator import Denied
from rmqpy.auth.metadata import AuthMetadata
from rmqpy.auth.model import User, acl_from_info
from rmqpy.auth.pipeline import AuthPipeline
from rmqpy.proxy.grpc.auth import GrpcAuth, credential, needs
from rmqpy.proxy.grpc.local import LocalChannel


@pytest.fixture
def auth(tmp_path):
    meta = AuthMetadata(str(tmp_path))
    meta.init_users('{"username":"root","password":"rootpw12"}', "")
    meta.create_user(User("alice", "alicepw1"))
    meta.create_or_update_acl(acl_from_info({"subject": "User:alice", "policies": [{"entries": [
        {"resource": "Topic:t", "actions": ["Pub", "Sub"], "decision": "Allow"},
        {"resource": "Group:g", "actions": ["Sub"], "decision": "Allow"},
        {"resource": "Topic:secret", "actions": ["Pub"], "decision": "Deny"}]}]}))
    pipeline = AuthPipeline(meta, True, True, lambda: "C", Clock())
    return GrpcAuth(pipeline)


def official(ak: str, sk: str) -> dict[str, str]:
    """The metadata the official Python client 5.1.2 sends with every call."""
    return dict(Signature.metadata(ClientConfiguration("127.0.0.1:8081", Credentials(ak, sk)), "client-1"))


def send(topic: str) -> spb.SendMessageRequest:
    return spb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name=topic), body=b"x")])


def test_signature_of_the_official_client_is_accepted(auth):
    md = official("alice", "alicepw1")
    assert md["authorization"].startswith("MQv2-HMAC-SHA1 Credential=alice, SignedHeaders=x-mq-date-time, Signature=")
    assert auth.check(md, send("t"), "127.0.0.1:5000", "127.0.0.1") is None
    assert auth.check(official("root", "rootpw12"), send("anything"), "127.0.0.1:5000", "127.0.0.1") is None


def test_signature_computed_independently():
    """HmacSHA1(secret, x-mq-date-time), hex; the broker compares Base64 of the same bytes."""
    date = "20261124T101500Z"
    hexsig = hmac.new(b"alicepw1", date.encode(), hashlib.sha1).hexdigest()
    assert hexsig == Signature.sign("alicepw1", date)  # the client signs what we compute
    cred = credential({"authorization": f"MQv2-HMAC-SHA1 Credential=alice, SignedHeaders=x-mq-date-time, "
                                        f"Signature={hexsig}", "x-mq-date-time": date})
    assert (cred.username, cred.content) == ("alice", date.encode())

    assert cred.signature == base64.b64encode(bytes.fromhex(hexsig)).decode()


def test_wrong_secret_unknown_user_no_credentials(auth):
    peer = ("127.0.0.1:5000", "127.0.0.1")
    assert auth.check(official("alice", "wrong"), send("t"), *peer) == "check signature failed."
    assert auth.check(official("bob", "x"), send("t"), *peer) == "User:bob is not found."
    assert auth.check(official("", ""), send("t"), *peer) == "username cannot be null."
    assert auth.check({"x-mq-client-id": "c"}, send("t"), *peer) == "username cannot be null."
    md = official("alice", "alicepw1")
    del md["x-mq-date-time"]
    assert auth.check(md, send("t"), *peer) == "datetime is null."
    md = official("alice", "alicepw1")
    md["authorization"] = "MQv2-HMAC-SHA1 Credential=alice, Signature=zz"
    assert auth.check(md, send("t"), *peer) == "create authentication context error."
    md["authorization"] = "garbage"
    assert auth.check(md, send("t"), *peer) == "authentication header is incorrect."
    md["authorization"] = "MQv2-HMAC-SHA1 Credential"
    assert auth.check(md, send("t"), *peer) == "authentication keyValues length is incorrect, actual length=1."


def test_authorization(auth):
    md, peer = official("alice", "alicepw1"), ("10.0.0.1:5000", "10.0.0.1")
    assert auth.check(md, send("secret"), *peer) == \
        "User:alice has no permission to access Topic:secret from 10.0.0.1, the decision is deny."
    assert auth.check(md, send("other"), *peer).endswith("no matched policies.")
    receive = spb.ReceiveMessageRequest(group=pb.Resource(name="g"), message_queue=pb.MessageQueue(
        topic=pb.Resource(name="t")))
    assert auth.check(md, receive, *peer) is None
    receive.group.name = "h"
    assert "Group:h" in auth.check(md, receive, *peer)
    route = spb.QueryRouteRequest(topic=pb.Resource(name="nope"))
    assert "Topic:nope" in auth.check(md, route, *peer)
    assert auth.check(md, spb.QueryRouteRequest(), *peer) == "topic is null."


def test_needs_per_call():
    def keys(request):
        return [(n.resource.key, n.actions) for n in needs(request)]
    g, t = pb.Resource(name="g"), pb.Resource(name="t")
    assert keys(spb.QueryRouteRequest(topic=t)) == [("Topic:t", ("Pub", "Sub"))]
    assert keys(spb.QueryAssignmentRequest(group=g, topic=t)) == [("Group:g", ("Sub",)), ("Topic:t", ("Sub",))]
    assert keys(spb.AckMessageRequest(group=g, topic=t)) == [("Group:g", ("Sub",)), ("Topic:t", ("Sub",))]
    assert keys(spb.ChangeInvisibleDurationRequest(group=g, topic=t)) == [("Group:g", ("Sub",))]
    assert keys(spb.HeartbeatRequest(group=g, client_type=pb.PRODUCER)) == []
    assert keys(spb.HeartbeatRequest(group=g, client_type=pb.SIMPLE_CONSUMER)) == [("Group:g", ("Sub",))]
    assert keys(spb.NotifyClientTerminationRequest()) == []
    assert keys(spb.EndTransactionRequest(topic=t)) == [("Topic:t", ("Pub",))]
    pub = spb.TelemetryCommand(settings=pb.Settings(publishing=pb.Publishing(topics=[t, pb.Resource(name="u")])))
    assert keys(pub) == [("Topic:t", ("Pub",)), ("Topic:u", ("Pub",))]
    sub = spb.TelemetryCommand(settings=pb.Settings(subscription=pb.Subscription(
        group=g, subscriptions=[pb.SubscriptionEntry(topic=t)])))
    assert keys(sub) == [("Group:g", ("Sub",)), ("Topic:t", ("Sub",))]
    with pytest.raises(Denied, match="settings command doesn't have publishing or subscription."):
        needs(spb.TelemetryCommand(settings=pb.Settings()))
    with pytest.raises(Denied, match="message is null."):
        needs(spb.SendMessageRequest())
    with pytest.raises(Denied, match="messageQueue is null."):
        needs(spb.ReceiveMessageRequest(group=g))


def test_refusals_logged_once_per_account_and_call(auth, capsys):
    from twisted.logger import globalLogPublisher
    lines: list[dict] = []
    globalLogPublisher.addObserver(lines.append)
    try:
        for _ in range(5):
            auth.check(official("alice", "wrong-secret"), send("t"), "127.0.0.1:5000", "127.0.0.1")
    finally:
        globalLogPublisher.removeObserver(lines.append)
    denials = [e for e in lines if "denied" in e.get("log_format", "")]
    assert len(denials) == 1
    assert denials[0]["ak"] == "alice" and denials[0]["code"] == "apache.rocketmq.v2.SendMessageRequest"
    assert "wrong-secret" not in repr(denials[0])


def test_remoting_hook_skips_grpc_channels(tmp_path):
    """The calls' remoting requests are not checked again by the broker's hook."""
    from rmqpy.protocol.command import RemotingCommand
    meta = AuthMetadata(str(tmp_path))
    pipeline = AuthPipeline(meta, True, True, lambda: "C", Clock(),
                            checked_elsewhere=lambda ch: isinstance(ch, LocalChannel))
    request = RemotingCommand.request(10, None)
    request.ext_fields = {"topic": "t"}
    assert pipeline.before_request(LocalChannel("127.0.0.1:1", Clock()), request) is None

    class Remote:
        remote_address, remote_host = "127.0.0.1:2", "127.0.0.1"
    assert pipeline.before_request(Remote(), request).remark == "username cannot be null."
