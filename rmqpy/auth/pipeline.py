"""The broker's 5.x authentication and authorization of each request (Java's
``AuthenticationPipeline`` and ``AuthorizationPipeline``, with the default providers and the
stateless strategies of RocketMQ 5.3.3).

:meth:`AuthPipeline.before_request` is a dispatcher request hook; it runs after the plain ACL
hook (aclEnable), as Java runs its request pipeline after the RPC hooks. It answers a refused
request NO_PERMISSION (16) with the remark Java gives:

* authentication (``authenticationEnabled``): the ``AccessKey`` names a user, who must be
  enabled, and ``Signature`` must be Base64(HmacSHA1(password, content)) over the same content
  as plain ACL (sorted extFields values but the signature, then the body; ``_UNIQUE_KEY_QUERY``
  is left out for clients of version 4.9.3 and older);
* authorization (``authorizationEnabled``): a Super user may do anything; anyone else needs,
  for each resource the request names (:mod:`rmqpy.auth.contexts`), a matching policy entry
  (Custom policy first, Default only when no Custom entry matches) whose decision is Allow.
  The entry that decides is the first after Java's sort of the matching entries (the
  ``*`` resource last; otherwise an order that depends on the entries' order, see
  :func:`compare_entries`), sorted here with the same comparator and the same insertion sort
  Java's ``List.sort`` uses for fewer than 32 entries, so that rmqpy decides as Java does.

Request codes listed in ``authenticationWhitelist`` / ``authorizationWhitelist`` (comma
separated numbers) skip the check. Users and ACLs are read from :class:`AuthMetadata` on every
request: a change made with mqadmin applies at once (Java caches them up to 60 s).

A refusal is logged once per account and code a minute (rate-limited, never the signature nor
the password); Java's audit log writes every refusal with the request's signature.
"""
from __future__ import annotations

from typing import Any, Callable

from rmqpy.acl import signature
from rmqpy.acl.validator import DenialLog, Denied
from rmqpy.auth.contexts import Need, needs
from rmqpy.auth.metadata import AuthMetadata
from rmqpy.auth.model import Acl, PolicyEntry
from rmqpy.protocol.codes import ResponseCode
from rmqpy.protocol.command import RemotingCommand

#: ``MQVersion.Version.V4_9_3.ordinal()``: clients up to it do not sign ``_UNIQUE_KEY_QUERY``
V4_9_3 = 399


def whitelist(text: str) -> frozenset[str]:
    return frozenset(code.strip() for code in text.split(",") if code.strip())


class AuthPipeline:
    def __init__(self, metadata: AuthMetadata, authentication: bool, authorization: bool,
                 cluster: Callable[[], str], clock: Any, authn_whitelist: str = "",
                 authz_whitelist: str = "", checked_elsewhere: Callable[[Any], bool] = lambda channel: False) -> None:
        self.metadata = metadata
        self.checked_elsewhere = checked_elsewhere  # channels whose calls were checked before (gRPC clients)
        self.authentication = authentication
        self.authorization = authorization
        self.cluster = cluster
        self.authn_whitelist = whitelist(authn_whitelist)
        self.authz_whitelist = whitelist(authz_whitelist)
        self.denials = DenialLog(clock)

    def before_request(self, channel: Any, request: RemotingCommand) -> RemotingCommand | None:
        if self.checked_elsewhere(channel):
            return None  # a gRPC call's requests: checked once per call (rmqpy.proxy.grpc.auth), as the proxy does
        ak = (request.ext_fields or {}).get(signature.ACCESS_KEY)
        try:
            if self.authentication:
                self.authenticate(request)
            if self.authorization:
                self.authorize(request, channel.remote_host)
        except Denied as denial:
            self.denials.denied(channel.remote_address, request.code, denial,
                                ak is not None and ak in self.metadata.users)
            return request.response(ResponseCode.NO_PERMISSION, str(denial))
        return None

    def authenticate(self, request: RemotingCommand) -> None:
        """``DefaultAuthenticationHandler``: raise :class:`Denied` unless the request is signed by an enabled user."""
        if str(request.code) in self.authn_whitelist:
            return
        ext = request.ext_fields or {}
        exclude = [signature.SIGNATURE]
        if request.version <= V4_9_3:
            exclude.append(signature.UNIQUE_MSG_QUERY_FLAG)
        self.check_signature(ext.get(signature.ACCESS_KEY), lambda: signature.content(ext, request.body, exclude),
                             ext.get(signature.SIGNATURE))

    def check_signature(self, username: str | None, content: Callable[[], bytes], given: str | None) -> None:
        """``DefaultAuthenticationHandler.doAuthenticate``: ``given`` (Base64) must be the HmacSHA1 of
        ``content()`` keyed with the enabled user's password."""
        if not username:
            raise Denied("username cannot be null.", "authn", None)
        user = self.metadata.users.get(username)
        if user is None:
            raise Denied(f"User:{username} is not found.", "authn", username)
        if user.userStatus == "disable":
            raise Denied(f"User:{username} is disabled.", "authn", username)
        expected = signature.calculate(content(), user.password or "")
        if not signature.matches(expected, given):
            raise Denied("check signature failed.", "authn", username)

    def authorize(self, request: RemotingCommand, source_ip: str) -> None:
        """``UserAuthorizationHandler`` then ``AclAuthorizationHandler`` for each resource, in order."""
        if str(request.code) in self.authz_whitelist:
            return
        username = (request.ext_fields or {}).get(signature.ACCESS_KEY)
        try:
            wanted = needs(request, self.cluster())
        except (ValueError, TypeError, AttributeError):
            raise Denied("parse authorization context error.", "authz", username) from None
        self.check_needs(username, wanted, source_ip)

    def check_needs(self, username: str | None, wanted: list[Need], source_ip: str) -> None:
        """``UserAuthorizationHandler`` then ``AclAuthorizationHandler``: raise :class:`Denied` at the
        first of ``wanted`` that ``username`` may not do from ``source_ip``."""
        for need in wanted:
            if username is None:
                raise Denied("Authorization failed. Please verify your access rights and try again.", "authz", None)
            user = self.metadata.users.get(username)
            if user is None:
                raise Denied(f"User:{username} not found.", "authz", username)
            if user.super:
                continue
            detail = decide(self.metadata.acls.get(f"User:{username}"), need, source_ip)
            if detail is not None:
                raise Denied(f"User:{username} has no permission to access {need.resource.key} from {source_ip}, "
                             f"{detail}", "authz", username)


def decide(acl: Acl | None, need: Need, source_ip: str) -> str | None:
    """None when ``acl`` allows ``need`` from ``source_ip``, else why not (Java's words)."""
    if acl is None:
        return "no matched policies."
    matched: list[PolicyEntry] = []
    for ptype in ("Custom", "Default"):
        policy = acl.policy(ptype)
        if policy is not None:
            matched = [e for e in policy.entries if e.matches(need.resource, need.actions, source_ip)]
        if matched:
            break
    if not matched:
        return "no matched policies."
    if java_sorted_first(matched).decision == "Deny":
        return "the decision is deny."
    return None


def compare_entries(o1: PolicyEntry, o2: PolicyEntry) -> int:
    """``AclAuthorizationHandler.comparePolicyEntries``, statement for statement (it is not a
    consistent order: two entries of one type and different patterns compare by the first one's)."""
    r1, r2 = o1.resource, o2.resource
    compare = 0
    if r1.type != r2.type:
        if r1.type == "Any":
            compare = 1
        if r2.type == "Any":
            compare = -1
    elif r1.pattern == r2.pattern:
        if r1.pattern == "PREFIXED":
            n1, n2 = len(r1.name or ""), len(r2.name or "")
            compare = (n1 > n2) - (n1 < n2)
    else:
        if r1.pattern in ("LITERAL", "PREFIXED"):
            compare = -1
    if compare != 0:
        return compare
    return 1 if o1.decision == "Deny" else -1 if o2.decision == "Deny" else 0


def java_sorted_first(entries: list[PolicyEntry]) -> PolicyEntry:
    """The first element after ``List.sort(comparePolicyEntries)``: Java's TimSort, which for
    fewer than 32 elements is a run count plus a binary insertion sort (used here for any size)."""
    a = list(entries)
    n = len(a)
    if n < 2:
        return a[0]
    cmp = compare_entries
    run = 2
    if cmp(a[1], a[0]) < 0:
        while run < n and cmp(a[run], a[run - 1]) < 0:
            run += 1
        a[:run] = reversed(a[:run])
    else:
        while run < n and cmp(a[run], a[run - 1]) >= 0:
            run += 1
    for start in range(run, n):
        pivot = a[start]
        left, right = 0, start
        while left < right:
            mid = (left + right) >> 1
            if cmp(pivot, a[mid]) < 0:
                right = mid
            else:
                left = mid + 1
        a[left + 1:start + 1] = a[left:start]
        a[left] = pivot
    return a[0]

