"""5.x authentication and authorization of gRPC calls (RocketMQ 5.3.3 proxy's
``AuthenticationPipeline`` and ``AuthorizationPipeline``), with the broker's own
:class:`~rmqpy.auth.pipeline.AuthPipeline`: the same users, policies and source-IP rules as
remoting requests.

Authentication reads the call's metadata as ``DefaultAuthenticationContextBuilder`` does:
``authorization: MQv2-HMAC-SHA1 Credential=<ak>, SignedHeaders=x-mq-date-time, Signature=<hex>``
names the user; the signature is HmacSHA1(password, the ``x-mq-date-time`` value), hex encoded.
A call without ``authorization`` has no user ("username cannot be null."). As in Java the date is
not checked against the clock, so a captured header can be replayed (use TLS).

Authorization needs, per request message, what ``DefaultAuthorizationContextBuilder`` lists
(:func:`needs`): Pub on the topic of a send or end-transaction, Sub on the group and topic of a
receive, ack, assignment query or dead-letter forward, Pub and Sub on a routed topic, Sub on a
consumer's group for heartbeats, invisible-duration changes and terminations, and, for a
Telemetry settings command, Pub on each published topic or Sub on the group and each
subscribed topic. The calls' remoting requests then skip the broker's request hook (as the
proxy's local mode calls the processors directly).

A refusal is answered as the proxy answers it: the response's Status with Code UNAUTHORIZED
(40100, for authentication and authorization alike: ``ResponseBuilder.buildStatus``) and Java's
message, and logged once per account and call a minute (never the signature).

Where rmqpy differs: the user authorized is the one the ``authorization`` header names (Java
takes an ``x-mq-authorization-ak`` header the client sent first) and the source IP is the
connection's peer (Java takes an ``rpc-remote-address`` header the client sent first); with
authentication off the header's Credential still names the user to authorize, as the remoting
requests' AccessKey does.
"""
from __future__ import annotations

import base64
import binascii
from typing import Any, Mapping

from rmqpy.acl.validator import Denied
from rmqpy.auth.contexts import GROUP, PUB, SUB, TOPIC, Need
from rmqpy.auth.model import Resource
from rmqpy.auth.pipeline import AuthPipeline
from rmqpy.proxy.grpc.local import LocalChannel

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
CONSUMERS = (2, 3, 4)  # ClientType PUSH_CONSUMER, SIMPLE_CONSUMER, PULL_CONSUMER
MAX_HEADER = 1024  # an authorization header longer than this is not read (Java reads any length)


class Credential:
    """What the ``authorization`` and ``x-mq-date-time`` metadata say: user, Base64 signature, signed bytes."""

    __slots__ = ("username", "signature", "content")

    def __init__(self, username: str | None, signature: str | None, content: bytes) -> None:
        self.username, self.signature, self.content = username, signature, content


def credential(metadata: Mapping[str, str]) -> Credential:
    """``DefaultAuthenticationContextBuilder.build(Metadata, ...)``; raises :class:`Denied` with Java's words."""
    header = metadata.get(AUTHORIZATION) or ""
    if not header:
        return Credential(None, None, b"")
    datetime = metadata.get(DATE_TIME) or ""
    if not datetime:
        raise Denied("datetime is null.", "authn", None)
    if len(header) > MAX_HEADER or len(datetime) > MAX_HEADER:
        raise Denied("authentication header is incorrect.", "authn", None)
    parts = header.split(" ", 1)
    if len(parts) != 2:
        raise Denied("authentication header is incorrect.", "authn", None)
    username: str | None = None
    signature: str | None = None
    for item in parts[1].split(","):
        kv = item.strip().split("=", 1)
        if len(kv) != 2:
            raise Denied(f"authentication keyValues length is incorrect, actual length={len(kv)}.", "authn", None)
        if kv[0] == "Credential":
            username = kv[1].split("/")[0]
        elif kv[0] == "Signature":
            try:
                signature = base64.b64encode(binascii.unhexlify(kv[1])).decode("ascii")
            except (binascii.Error, ValueError):
                raise Denied("create authentication context error.", "authn", username) from None
    return Credential(username, signature, datetime.encode("utf-8"))


def _name(resource: Any) -> str:
    return str(resource.name) if resource is not None else ""


def needs(request: Any) -> list[Need]:
    """What a request message needs (``DefaultAuthorizationContextBuilder.build(Metadata, message)``);
    raises :class:`Denied` for a message that names no topic or group where one is needed."""
    kind = request.DESCRIPTOR.name

    def topic(resource: Any, *actions: str) -> Need:
        if not _name(resource).strip():
            raise Denied("topic is null.", "authz", None)
        return Need(Resource(TOPIC, _name(resource), "LITERAL"), actions)

    def group(resource: Any) -> Need:
        if not _name(resource).strip():
            raise Denied("group is null.", "authz", None)
        return Need(Resource(GROUP, _name(resource), "LITERAL"), (SUB,))

    if kind == "SendMessageRequest":
        if not request.messages:
            raise Denied("message is null.", "authz", None)
        return [topic(request.messages[0].topic, PUB)]
    if kind == "EndTransactionRequest":
        return [topic(request.topic, PUB)]
    if kind == "HeartbeatRequest":
        return [group(request.group)] if request.client_type in CONSUMERS else []
    if kind == "ReceiveMessageRequest":
        if not request.HasField("message_queue"):
            raise Denied("messageQueue is null.", "authz", None)
        return [group(request.group), topic(request.message_queue.topic, SUB)]
    if kind in ("AckMessageRequest", "ForwardMessageToDeadLetterQueueRequest", "QueryAssignmentRequest"):
        return [group(request.group), topic(request.topic, SUB)]
    if kind == "NotifyClientTerminationRequest":
        return [group(request.group)] if _name(request.group).strip() else []
    if kind == "ChangeInvisibleDurationRequest":
        return [group(request.group)]
    if kind == "QueryRouteRequest":
        return [topic(request.topic, PUB, SUB)]
    if kind == "TelemetryCommand":
        if request.WhichOneof("command") != "settings":
            return []
        settings = request.settings
        if not settings.HasField("publishing") and not settings.HasField("subscription"):
            raise Denied("settings command doesn't have publishing or subscription.", "authz", None)
        out = [topic(t, PUB) for t in settings.publishing.topics] if settings.HasField("publishing") else []
        if settings.HasField("subscription"):
            out.append(group(settings.subscription.group))
            out.extend(topic(entry.topic, SUB) for entry in settings.subscription.subscriptions)
        return out
    return []


def exempt_local_channels(pipeline: AuthPipeline | None) -> None:
    """The broker's request hook lets the remoting requests of gRPC calls (those on a
    :class:`LocalChannel`) through: each call was checked once, by :class:`GrpcAuth`, as the proxy's
    local mode calls the broker's processors without the broker's pipeline. The endpoint sets this
    when it is built, so that the broker needs to know nothing of the gRPC layer."""
    if pipeline is not None:
        pipeline.checked_elsewhere = lambda channel: isinstance(channel, LocalChannel)


class GrpcAuth:
    """Checks each gRPC call with the broker's :class:`AuthPipeline`; runs on the reactor (the
    users and policies change there)."""

    def __init__(self, pipeline: AuthPipeline) -> None:
        self.pipeline = pipeline

    def check(self, metadata: Mapping[str, str], request: Any, peer: str, source_ip: str) -> str | None:
        """None when the call may go on, else Java's reason (logged, rate-limited)."""
        p = self.pipeline
        rpc = request.DESCRIPTOR.full_name  # the whitelists name gRPC calls by their message
        username: str | None = None
        try:
            cred = credential(metadata)
            username = cred.username
            if p.authentication and rpc not in p.authn_whitelist:
                p.check_signature(cred.username, lambda: cred.content, cred.signature)
            if p.authorization and rpc not in p.authz_whitelist:
                p.check_needs(cred.username, needs(request), source_ip)
        except Denied as denial:
            if denial.access_key is None:
                denial.access_key = username
            p.denials.denied(peer, rpc, denial, username is not None and username in p.metadata.users)
            return str(denial)
        return None
