"""Signing the broker's own requests, as Java's ``AclClientRPCHook`` on ``BrokerOuterAPI``.

5.x reads the credentials from ``innerClientAuthenticationCredentials``, a JSON object
``{"accessKey": "...", "secretKey": "..."}`` (``securityToken`` optional); with them every
request the broker sends to its name servers is signed. A value that is set but unusable is
an error at start-up (Java ignores a blank key silently, and would send unsigned requests).
"""
from __future__ import annotations

import json

from rmqpy.acl import signature
from rmqpy.acl.permission import AclError
from rmqpy.protocol.command import RemotingCommand


class AclClientHook:
    def __init__(self, access_key: str, secret_key: str, security_token: str | None = None) -> None:
        self.access_key = access_key
        self.secret_key = secret_key
        self.security_token = security_token

    def __repr__(self) -> str:  # never the secret
        return f"<AclClientHook accessKey={self.access_key}>"

    @classmethod
    def from_credentials(cls, text: str) -> "AclClientHook | None":
        """The hook for an ``innerClientAuthenticationCredentials`` value; None when it is blank."""
        if not text.strip():
            return None
        try:
            doc = json.loads(text)
        except ValueError:
            raise AclError("innerClientAuthenticationCredentials: not a JSON object "
                           "like {\"accessKey\": \"...\", \"secretKey\": \"...\"}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("accessKey"), str) \
                or not isinstance(doc.get("secretKey"), str) or not doc["accessKey"] or not doc["secretKey"]:
            raise AclError("innerClientAuthenticationCredentials: needs non-empty accessKey and secretKey")
        token = doc.get("securityToken")
        return cls(doc["accessKey"], doc["secretKey"], str(token) if token is not None else None)

    def __call__(self, addr: str, request: RemotingCommand) -> None:
        fields = dict(request.ext_fields or {})
        signature.sign(fields, request.body, self.access_key, self.secret_key, self.security_token)
        request.ext_fields = fields
