"""Plain ACL checks of each request, before its processor runs (Java's ``PlainAccessValidator``
registered as a server RPC hook by ``BrokerController.initialAcl``).

:meth:`PlainAccessValidator.before_request` is the dispatcher's request hook: it returns None to
let the request through, or the answer a 4.9 broker gives a refused request: SYSTEM_ERROR (1)
with ``AclException``'s text and the top stack frame as the remark (Java's
``RemotingHelper.exceptionSimpleDesc``); a oneway request is dropped. The order of the checks is
Java's: a global white address passes; else the access key must be known; an account's white
address passes; else the signature must match; then admin codes need an admin account and
each topic/group the request names needs its permission.

Where rmqpy is stricter than Java 4.9.7, on purpose:

* ACL management codes (UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG,
  UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, and GET_BROKER_CLUSTER_ACL_CONFIG, which answers
  every secret key) need an admin account too: in Java any account with a valid signature
  may read and rewrite the ACL files.
* SEND_BATCH_MESSAGE, LITE_PULL_MESSAGE and SEND_REPLY_MESSAGE(_V2) are checked like the
  sends and pulls they are; Java 4.9.7 lets any valid account batch-send to any topic.
* A denial is logged (rate-limited, once per access key and request code a minute, never
  the secret); Java logs every denial with the whole request.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

from twisted.logger import Logger

from rmqpy.acl import signature
from rmqpy.acl.permission import (
    JAVA_ADMIN_CODES,
    PUB,
    SUB,
    TRACE_TOPIC,
    AclError,
    check,
    describe,
    is_retry_topic,
    retry_topic,
)
from rmqpy.acl.plain import PlainAclRules
from rmqpy.protocol.bodies.heartbeat import HeartbeatData
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.remoting.ratelimit import clip

ACL_ADMIN_CODES = frozenset(int(c) for c in (
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, RequestCode.DELETE_ACL_CONFIG,
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG,
))
ADMIN_CODES = JAVA_ADMIN_CODES | ACL_ADMIN_CODES

# the line of PlainPermissionManager.java (4.9.7) that throws each denial: Java's remark names it
_JAVA_FRAMES = {
    "no-key": "validate(PlainPermissionManager.java:663)",
    "unknown-key": "validate(PlainPermissionManager.java:667)",
    "signature": "validate(PlainPermissionManager.java:683)",
    "admin": "checkPerm(PlainPermissionManager.java:580)",
    "default-perm": "checkPerm(PlainPermissionManager.java:605)",
    "perm": "checkPerm(PlainPermissionManager.java:610)",
}
_SEND_V2 = (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2)
_SEND_V1 = (RequestCode.SEND_MESSAGE, RequestCode.SEND_REPLY_MESSAGE)
_PULLS = (RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE)


class Denied(AclError):
    def __init__(self, message: str, kind: str, access_key: str | None) -> None:
        super().__init__(message, kind)
        self.kind = kind
        self.access_key = access_key


def needed_resources(request: RemotingCommand) -> dict[str, int]:
    """The topics (by name) and groups (by retry topic) ``request`` uses, with the permission each needs.

    Missing fields name nothing (the processor refuses the request); a heartbeat body that
    cannot be read is a denial, as in Java."""
    ext = request.ext_fields or {}
    code = request.code
    need: dict[str, int] = {}

    def add(resource: str | None, perm: int) -> None:
        if resource is not None:
            need[resource] = perm

    def group(name: str | None) -> str | None:
        return retry_topic(name) if name is not None else None

    if code in _SEND_V1 or code in _SEND_V2:
        topic, grp = (ext.get("b"), ext.get("a")) if code in _SEND_V2 and "b" in ext else (ext.get("topic"), ext.get("producerGroup"))
        if is_retry_topic(topic):
            # a consumer's send-back to the retry topic: SUB on the group (Java reads the
            # group from the header's group field, which V1 sends call producerGroup)
            add(group(ext.get("a") if code in _SEND_V2 and "b" in ext else ext.get("group", grp)), SUB)
        else:
            add(topic, PUB)
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        add(group(ext.get("group")), SUB)
    elif code in _PULLS:
        add(ext.get("topic"), SUB)
        add(group(ext.get("consumerGroup")), SUB)
    elif code == RequestCode.QUERY_MESSAGE:
        add(ext.get("topic"), SUB)
    elif code == RequestCode.HEART_BEAT:
        try:
            heartbeat = HeartbeatData.decode(request.body or b"{}")
        except Exception as exc:
            raise AclError(f"bad heartbeat body: {exc}", "parse") from None
        for consumer in heartbeat.consumerDataSet:
            add(group(consumer.groupName), SUB)
            for sub in consumer.subscriptionDataSet:
                add(sub.topic, SUB)
    elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        add(group(ext.get("consumerGroup")), SUB)
    elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
        add(group(ext.get("consumerGroup")), SUB)
        add(ext.get("topic"), SUB)
    return need


class DenialLog:
    """One log line per (access key, request code) a minute, at most ``size`` pairs remembered.

    Unknown access keys share one slot, so a client trying made-up keys cannot grow the table
    nor write a line per key."""

    log = Logger(namespace="rmqpy.acl")

    def __init__(self, clock: Any, interval: float = 60.0, size: int = 1024) -> None:
        self.clock = clock
        self.interval = interval
        self.size = size
        self._last: OrderedDict[tuple[str, int | str], tuple[float, int]] = OrderedDict()

    def denied(self, peer: str, code: int | str, denial: Denied, known_key: bool) -> bool:
        account = denial.access_key if known_key and denial.access_key else "<no or unknown access key>"
        slot = (account, code)
        now = self.clock.seconds()
        last = self._last.get(slot)
        if last is not None and now - last[0] < self.interval:
            self._last[slot] = (last[0], last[1] + 1)
            return False
        suppressed = last[1] if last is not None else 0
        self._last[slot] = (now, 0)
        self._last.move_to_end(slot)
        while len(self._last) > self.size:
            self._last.popitem(last=False)
        self.log.warn("ACL denied request code {code} from {peer}, accessKey {ak}: {why}{more}",
                      code=code, peer=peer, ak=clip(account), why=clip(str(denial)),
                      more=f" ({suppressed} more denials of this key and code since the last line)" if suppressed else "")
        return True


class PlainAccessValidator:
    """The dispatcher hook of plain ACL over the rules ``rules()`` returns (swapped on reload)."""

    def __init__(self, rules: Callable[[], PlainAclRules], clock: Any) -> None:
        self.rules = rules
        self.denials = DenialLog(clock)

    def before_request(self, channel: Any, request: RemotingCommand) -> RemotingCommand | None:
        rules = self.rules()
        host = channel.remote_host
        try:
            self.validate(rules, request, host)
        except Denied as denial:
            self.denials.denied(channel.remote_address, request.code, denial,
                                denial.access_key in rules.accounts)
            frame = _JAVA_FRAMES.get(denial.kind, "parse(PlainAccessValidator.java:140)")
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"org.apache.rocketmq.acl.common.AclException: {denial}, "
                                    f"org.apache.rocketmq.acl.plain.{_class(frame)}.{frame}")
        return None

    @staticmethod
    def validate(rules: PlainAclRules, request: RemotingCommand, host: str) -> None:
        """Raise :class:`Denied` unless ``request`` from ``host`` may run (Java's ``validate``)."""
        if any(match(host) for match in rules.global_white):
            return
        ext = request.ext_fields or {}
        ak = ext.get(signature.ACCESS_KEY)
        if ak is None:
            raise Denied("No accessKey is configured", "no-key", None)
        account = rules.accounts.get(ak)
        if account is None:
            raise Denied(f"No acl config for {ak}", "unknown-key", ak)
        if account.white(host):
            return
        content = signature.content(ext, request.body, (signature.SIGNATURE, signature.UNIQUE_MSG_QUERY_FLAG))
        if not signature.matches(signature.calculate(content, account.secret_key), ext.get(signature.SIGNATURE)):
            raise Denied(f"Check signature failed for accessKey={ak}", "signature", ak)
        try:
            need = needed_resources(request)
        except AclError as exc:
            raise Denied(str(exc), "parse", ak) from None
        if need.get(TRACE_TOPIC) == PUB:  # message traces are always allowed, as in Java
            return
        if request.code in ADMIN_CODES and not account.admin:
            raise Denied(f"Need admin permission for request code={request.code}, but accessKey={ak} is not",
                         "admin", ak)
        if not need or (not account.perms and account.admin):
            return
        for resource, perm in need.items():
            owned = account.perms.get(resource)
            if owned is None:
                owned = account.default_group_perm if is_retry_topic(resource) else account.default_topic_perm
                if not check(perm, owned):
                    raise Denied(f"No default permission for {describe(resource)}", "default-perm", ak)
            elif not check(perm, owned):
                raise Denied(f"No default permission for {describe(resource)}", "perm", ak)


def _class(frame: str) -> str:
    return frame.split("(", 1)[1].split(".java", 1)[0]
