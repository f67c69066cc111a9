"""Users and ACLs, kept in one JSON file of rmqpy's (Java's ``AuthenticationMetadataManagerImpl``,
``AuthorizationMetadataManagerImpl`` and their ``Local*MetadataProvider`` in one class).

Java keeps users and ACLs in two RocksDB databases under ``authConfigPath``
(``<storePathRootDir>/config``). rmqpy keeps them in ``<storePathRootDir>/config/auth.json``:
``{"users": [UserInfo...], "acls": [AclInfo...]}``, the admin codes' own JSON shapes, so a
person can read it and a backup is one file. Every change rewrites the file (fsynced temporary
file, then renamed over it, mode 0600 as it holds passwords, as Java's RocksDB does) before
it is answered; the data is small and changes are rare, which is what RocksDB bought Java.

Lists come back in key order (UTF-8 bytes), as a RocksDB iterator walks them. The checks
and their messages are Java's; the managers' failures are :class:`AuthError`.
"""
from __future__ import annotations

import copy
import json
import os
from typing import Any

from rmqpy.auth.model import (
    Acl,
    AuthError,
    PolicyEntry,
    Resource,
    User,
    acl_from_info,
    valid_ip_or_cidr,
)

FILE_NAME = "auth.json"
#: bounds on what the admin codes can make the broker keep (Java has none)
MAX_USERS = 100_000
MAX_ACLS = 100_000
MAX_ENTRIES = 10_000
MAX_FILE_BYTES = 256 * 1024 * 1024


def _key(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


class AuthMetadata:
    def __init__(self, config_dir: str) -> None:
        self.path = os.path.join(config_dir, FILE_NAME)
        self.users: dict[str, User] = {}
        self.acls: dict[str, Acl] = {}

    # ------------------------------------------------------------------ file
    def load(self) -> None:
        """Read the file (absent: nothing yet); a broken file raises (the broker does not start)."""
        if not os.path.exists(self.path):
            return
        with open(self.path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise ValueError(f"{self.path}: larger than {MAX_FILE_BYTES} bytes")
        try:
            doc = json.loads(data.decode("utf-8"))
            users = {}
            for info in doc.get("users") or []:
                user = User.from_info(info)
                if not user.username:
                    raise ValueError("a user without a username")
                users[user.username] = user
            acls = {}
            for info in doc.get("acls") or []:
                acl = acl_from_info(info)
                if not acl.subject:
                    raise ValueError(f"an ACL without a User: subject: {info.get('subject')!r}")
                self._validate(acl)
                acls[acl.subject] = acl
        except (ValueError, AttributeError, TypeError, AuthError) as exc:
            raise ValueError(f"{self.path}: {exc}") from None
        self.users, self.acls = users, acls

    def persist(self) -> None:
        doc = {"users": [self.users[k].to_info() for k in sorted(self.users, key=_key)],
               "acls": [self.acls[k].to_info() for k in sorted(self.acls, key=_key)]}
        text = json.dumps(doc, indent=2, ensure_ascii=False)
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        tmp = self.path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    # ------------------------------------------------------------------ users
    def init_users(self, init_user: str, inner_credentials: str) -> None:
        """``initUser``: ``initAuthenticationUser`` and the inner client's credentials become Super
        users when no user of that name exists yet."""
        changed = False
        if init_user.strip():
            try:
                doc = json.loads(init_user)
                user = User.from_info(doc)
            except (ValueError, AttributeError) as exc:
                raise AuthError(f"Init authentication user error. {exc}", True) from None
            user.userType = "Super"
            if user.username not in self.users:
                self._check_new(user)
                self.users[user.username] = user
                changed = True
        if inner_credentials.strip():
            try:
                doc = json.loads(inner_credentials)
                user = User(str(doc["accessKey"]), str(doc["secretKey"]), "Super")
            except (ValueError, KeyError, TypeError) as exc:
                raise AuthError(f"Init inner client authentication credentials error {exc}", True) from None
            if user.username not in self.users:
                self._check_new(user)
                self.users[user.username] = user
                changed = True
        if changed:
            self.persist()

    def get_user(self, username: str | None) -> User | None:
        if not username or not username.strip():
            raise AuthError("username can not be blank", True)
        return self.users.get(username)

    def is_super(self, username: str) -> bool:
        user = self.users.get(username)
        if user is None:
            raise AuthError(f"User:{username} is not found", True)
        return user.super

    def _check_new(self, user: User) -> None:
        if not user.username or not user.username.strip():
            raise AuthError("username can not be blank", True)
        if not user.password or not user.password.strip():
            raise AuthError("password can not be blank", True)
        if user.userType is None:
            user.userType = "Normal"
        if user.userStatus is None:
            user.userStatus = "enable"

    def create_user(self, user: User) -> None:
        self._check_new(user)
        if user.username in self.users:
            raise AuthError("The user is existed", True)
        if len(self.users) >= MAX_USERS:
            raise AuthError(f"rmqpy keeps at most {MAX_USERS} users", True)
        self.users[user.username] = user
        self.persist()

    def update_user(self, user: User) -> None:
        if not user.username or not user.username.strip():
            raise AuthError("username can not be blank", True)
        old = self.users.get(user.username)
        if old is None:
            raise AuthError("The user is not exist", True)
        if user.password and user.password.strip():
            old.password = user.password
        if user.userType is not None:
            old.userType = user.userType
        if user.userStatus is not None:
            old.userStatus = user.userStatus
        self.persist()

    def delete_user(self, username: str) -> None:
        """The user and the ACL of ``User:username``."""
        if not username or not username.strip():
            raise AuthError("username can not be blank", True)
        self.users.pop(username, None)
        self.acls.pop(f"User:{username}", None)
        self.persist()

    def list_users(self, name_filter: str | None) -> list[User]:
        return [self.users[k] for k in sorted(self.users, key=_key)
                if not (name_filter and name_filter.strip()) or name_filter in k]

    # ------------------------------------------------------------------ ACLs
    def _subject_exists(self, subject: str) -> bool:
        return subject[len("User:"):] in self.users

    @staticmethod
    def _validate_entry(entry: PolicyEntry) -> None:
        if entry.resource is None:
            raise AuthError("The resource is null.")
        if not entry.actions:
            raise AuthError("The actions is empty.")
        if "Any" in entry.actions:
            raise AuthError("The actions can not be Any.")
        for ip in entry.source_ips:
            if not ip.strip():
                raise AuthError("The source ip is empty.")
            if not valid_ip_or_cidr(ip):
                raise AuthError("The source ip is invalid.")
        if entry.decision is None:
            raise AuthError("The decision is null or illegal.")

    def _validate(self, acl: Acl) -> None:
        if not acl.policies:
            raise AuthError("The policies is empty.")
        for policy in acl.policies:
            if not policy.entries:
                raise AuthError("The policy entries is empty.")
            if len(policy.entries) > MAX_ENTRIES:
                raise AuthError(f"rmqpy keeps at most {MAX_ENTRIES} entries in a policy")
            for entry in policy.entries:
                self._validate_entry(entry)
            if policy.type is None:
                policy.type = "Custom"

    def create_or_update_acl(self, acl: Acl) -> None:
        """Java's ``createAcl`` and ``updateAcl`` alike: a new ACL, or the policies merged into the old one."""
        self._validate(acl)
        if not self._subject_exists(acl.subject):
            raise AuthError(f"The subject of {acl.subject} is not exist.")
        old = self.acls.get(acl.subject)
        if old is None:
            if len(self.acls) >= MAX_ACLS:
                raise AuthError(f"rmqpy keeps at most {MAX_ACLS} ACLs")
            self.acls[acl.subject] = acl
        else:
            merged = copy.deepcopy(old)
            merged.update(acl.policies)
            if any(len(p.entries) > MAX_ENTRIES for p in merged.policies):
                raise AuthError(f"rmqpy keeps at most {MAX_ENTRIES} entries in a policy")
            self.acls[acl.subject] = merged
        self.persist()

    def delete_acl(self, subject: str | None, policy_type: str | None, resource: Resource | None) -> None:
        if not subject:
            raise AuthError("The subject is null.")
        if not self._subject_exists(subject):
            raise AuthError("The subject is not exist.")
        acl = self.acls.get(subject)
        if acl is None:
            raise AuthError("The acl is not exist.")
        if resource is not None:
            acl.delete(policy_type or "Custom", resource)
        if resource is None or not acl.policies:
            del self.acls[subject]
        self.persist()

    def get_acl(self, subject: str) -> Acl | None:
        if not self._subject_exists(subject):
            raise AuthError("The subject is not exist.")
        return self.acls.get(subject)

    def list_acls(self, subject_filter: str | None, resource_filter: str | None) -> list[dict[str, Any]]:
        """``listAcl`` as AclInfo dicts. As in Java, a resource filter found in the subject key keeps every entry."""
        out = []
        for key in sorted(self.acls, key=_key):
            if subject_filter and subject_filter.strip() and subject_filter not in key:
                continue
            info = self.acls[key].to_info()
            policies = []
            for policy in info.get("policies") or []:
                entries = policy.get("entries") or []
                if resource_filter and resource_filter.strip() and resource_filter not in key:
                    entries = [e for e in entries if resource_filter in e["resource"]]
                if entries:
                    policies.append({**policy, "entries": entries})
            if policies:
                out.append({"subject": key, "policies": policies})
        return out
