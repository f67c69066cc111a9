"""Users and ACLs of RocketMQ 5.x authentication/authorization (Java's ``rocketmq-auth`` model).

Names are Java's: user types ``Super``/``Normal``, statuses ``enable``/``disable``, actions
``All Any Pub Sub Create Update Delete Get List``, resource types ``Cluster Namespace Topic
Group`` and ``*`` (any), decisions ``Allow``/``Deny``, policy types ``Custom``/``Default``;
names are read case-insensitively as ``getByName`` does. A resource key is ``Type:name``
(literal), ``Type:prefix*`` (prefixed), ``Type:*`` (any name) or ``*`` (anything).

The JSON shapes are those of the admin codes' bodies (``UserInfo``, ``AclInfo``), which are
also what rmqpy stores (:mod:`rmqpy.auth.metadata`).
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

USER_TYPES = ("Super", "Normal")
USER_STATUSES = ("enable", "disable")
ACTIONS = ("Unknown", "All", "Any", "Pub", "Sub", "Create", "Update", "Delete", "Get", "List")
RESOURCE_TYPES = ("Unknown", "Any", "Cluster", "Namespace", "Topic", "Group")
DECISIONS = ("Allow", "Deny")
POLICY_TYPES = ("Custom", "Default")

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"


class AuthError(Exception):
    """A refusal with Java's message; ``authn`` tells AuthenticationException from AuthorizationException."""

    def __init__(self, message: str, authn: bool = False) -> None:
        super().__init__(message)
        self.authn = authn


def by_name(names: tuple[str, ...], value: Any) -> str | None:
    """Java's ``getByName``: the canonical name equal to ``value`` ignoring case, else None."""
    if not isinstance(value, str):
        return None
    low = value.lower()
    return next((n for n in names if n.lower() == low), None)


def is_retry_topic(name: str | None) -> bool:
    return bool(name and name.strip()) and name.startswith(RETRY_PREFIX)  # type: ignore[union-attr]


def without_retry_and_dlq(name: str) -> str:
    if name.startswith(RETRY_PREFIX):
        return name[len(RETRY_PREFIX):]
    if name.startswith(DLQ_PREFIX):
        return name[len(DLQ_PREFIX):]
    return name


@dataclass
class User:
    username: str
    password: str | None = None
    userType: str | None = None
    userStatus: str | None = None

    @property
    def super(self) -> bool:
        return self.userType == "Super"

    def to_info(self) -> dict[str, Any]:
        """``UserInfo`` as fastjson writes it (nulls left out)."""
        info = {"username": self.username, "password": self.password, "userType": self.userType,
                "userStatus": self.userStatus}
        return {k: v for k, v in info.items() if v is not None}

    @classmethod
    def from_info(cls, info: dict[str, Any], username: str | None = None) -> "User":
        """``UserConverter.convertUser``: unknown type or status names read as None."""
        name = username if username is not None else info.get("username")
        pw = info.get("password")
        return cls(str(name) if name is not None else "", str(pw) if pw is not None else None,
                   by_name(USER_TYPES, info.get("userType")), by_name(USER_STATUSES, info.get("userStatus")))

    def __repr__(self) -> str:  # never the password
        return f"User({self.username!r}, {self.userType}, {self.userStatus})"


@dataclass(frozen=True)
class Resource:
    type: str  # a RESOURCE_TYPES name
    name: str | None
    pattern: str  # ANY, LITERAL or PREFIXED

    @classmethod
    def parse(cls, key: Any) -> "Resource | None":
        """``Resource.of(String)``: None for a blank key or an unknown type."""
        if not isinstance(key, str) or not key.strip():
            return None
        if key == "*":
            return cls("Any", None, "ANY")
        kind, _, name = key.partition(":")
        rtype = by_name(RESOURCE_TYPES, kind)
        if rtype is None:
            return None
        if name == "*":
            return cls(rtype, None, "ANY")
        if name.endswith("*"):
            return cls(rtype, name[:name.index("*")], "PREFIXED")
        return cls(rtype, name, "LITERAL")

    @classmethod
    def topic(cls, name: str | None) -> "Resource":
        return cls("Topic", name, "LITERAL")

    @classmethod
    def group(cls, name: str | None) -> "Resource":
        """``Resource.ofGroup``: a retry topic names its group."""
        if is_retry_topic(name):
            name = without_retry_and_dlq(name)  # type: ignore[arg-type]
        return cls("Group", name, "LITERAL")

    @classmethod
    def cluster(cls, name: str | None) -> "Resource":
        return cls("Cluster", name, "LITERAL")

    @property
    def key(self) -> str:
        if self.type == "Any":
            return "*"
        if self.pattern == "ANY":
            return f"{self.type}:*"
        name = "null" if self.name is None else self.name  # as Java prints a missing name
        if self.pattern == "PREFIXED":
            return f"{self.type}:{name}*"
        return f"{self.type}:{name}"

    def matches(self, other: "Resource") -> bool:
        """Whether this (policy) resource covers the requested resource ``other``."""
        if self.type == "Any":
            return True
        if self.type != other.type:
            return False
        if self.pattern == "ANY":
            return True
        if self.pattern == "LITERAL":
            return self.name == other.name
        return other.name is not None and other.name.startswith(self.name or "")


def ip_in_range(ip: str, cidr: str) -> bool:
    """``IPAddressUtils.isIPInRange``: equal strings without a '/', else inside the CIDR."""
    parts = cidr.split("/")
    if len(parts) == 1:
        return ip == cidr
    if len(parts) != 2:
        return False
    try:
        net = ipaddress.ip_network(cidr, strict=False)
        return ipaddress.ip_address(ip) in net
    except ValueError:
        return False


def valid_ip_or_cidr(value: str) -> bool:
    try:
        if "/" in value:
            host, _, prefix = value.partition("/")
            addr = ipaddress.ip_address(host)
            return prefix.isdigit() and 0 <= int(prefix) <= (32 if addr.version == 4 else 128)
        ipaddress.ip_address(value)
        return True
    except ValueError:
        return False


@dataclass
class PolicyEntry:
    resource: Resource
    actions: list[str]
    source_ips: list[str] = field(default_factory=list)
    decision: str | None = "Allow"

    def matches(self, resource: Resource, actions: tuple[str, ...], source_ip: str | None) -> bool:
        if not self.resource.matches(resource):
            return False
        if not self.actions:
            return False
        if "Any" not in actions and not any(a in self.actions or "All" in self.actions for a in actions):
            return False
        if not self.source_ips:
            return True
        return bool(source_ip) and any(ip_in_range(source_ip, s) for s in self.source_ips)  # type: ignore[arg-type]

    def to_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"resource": self.resource.key, "actions": list(self.actions) or None,
                                "sourceIps": list(self.source_ips) or None, "decision": self.decision}
        return {k: v for k, v in info.items() if v is not None}


@dataclass
class Policy:
    type: str | None
    entries: list[PolicyEntry]

    def update(self, entries: list[PolicyEntry]) -> None:
        """``Policy.updateEntry``: an entry for the same resource is replaced in place, others appended."""
        for new in entries:
            old = next((e for e in self.entries if e.resource == new.resource), None)
            if old is None:
                self.entries.append(new)
            else:
                old.actions, old.source_ips, old.decision = new.actions, new.source_ips, new.decision

    def to_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"policyType": self.type}
        if self.entries:
            info["entries"] = [e.to_info() for e in self.entries]
        return {k: v for k, v in info.items() if v is not None}


@dataclass
class Acl:
    subject: str  # "User:name"
    policies: list[Policy]

    def policy(self, ptype: str) -> Policy | None:
        return next((p for p in self.policies if p.type == ptype), None)

    def update(self, policies: list[Policy]) -> None:
        """``Acl.updatePolicy``."""
        for new in policies:
            old = self.policy(new.type or "Custom")
            if old is None:
                self.policies.append(new)
            else:
                old.update(new.entries)

    def delete(self, ptype: str, resource: Resource) -> None:
        """``Acl.deletePolicy``: drop the resource's entry, then the policy once it is empty."""
        policy = self.policy(ptype)
        if policy is None:
            return
        policy.entries = [e for e in policy.entries if e.resource != resource]
        if not policy.entries:
            self.policies.remove(policy)

    def to_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"subject": self.subject}
        if self.policies:
            info["policies"] = [p.to_info() for p in self.policies]
        return info


def subject_user(key: Any) -> str | None:
    """``Subject.of``: the user name of ``User:name`` (type read ignoring case), else None."""
    if not isinstance(key, str):
        return None
    kind, _, name = key.partition(":")
    return name if kind.lower() == "user" else None


def acl_from_info(info: dict[str, Any]) -> Acl:
    """``AclConverter.convertAcl``: entries with no entries skipped, unknown action names dropped;
    unknown resources, decisions and policy types read as None (validation refuses them)."""
    user = subject_user(info.get("subject"))
    policies: list[Policy] = []
    for p in info.get("policies") or []:
        if not isinstance(p, dict):
            raise ValueError("a policy is not a JSON object")
        entries: list[PolicyEntry] = []
        for e in p.get("entries") or []:
            if not isinstance(e, dict):
                raise ValueError("a policy entry is not a JSON object")
            actions = e.get("actions")
            if not isinstance(actions, list):
                raise ValueError("actions is not a list")
            ips = e.get("sourceIps") or []
            if not isinstance(ips, list):
                raise ValueError("sourceIps is not a list")
            entries.append(PolicyEntry(Resource.parse(e.get("resource")),  # type: ignore[arg-type]
                                       [a for a in (by_name(ACTIONS, x) for x in actions) if a is not None],
                                       [str(i) if i is not None else "" for i in ips],
                                       by_name(DECISIONS, e.get("decision"))))
        if entries:
            policies.append(Policy(by_name(POLICY_TYPES, p.get("policyType")), entries))
    return Acl(f"User:{user}" if user is not None else "", policies)
