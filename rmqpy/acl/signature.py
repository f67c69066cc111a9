"""The request signature of RocketMQ's ACL: what ``AclClientRPCHook`` signs and how.

The client puts ``AccessKey`` (and ``SecurityToken`` when it has one) into the request's
extFields, then signs the values of all extFields but ``Signature``, sorted by key (Java's
``TreeMap``: UTF-16 code-unit order) and concatenated without keys or separators, followed
by the raw body: ``Signature`` = Base64(HmacSHA1(secretKey, content)). 4.9 and 5.x clients
sign alike. The 4.9 broker leaves ``_UNIQUE_KEY_QUERY`` out of the content it checks too
(``PlainAccessValidator.parse``), so a client that sends that flag unsigned is accepted.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Iterable, Mapping

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"


def _java_order(key: str) -> bytes:
    """A sort key giving Java's String.compareTo order (UTF-16 code units), also for astral characters."""
    return key.encode("utf-16-be", "surrogatepass")


def content(ext_fields: Mapping[str, str] | None, body: bytes | None,
            exclude: Iterable[str] = (SIGNATURE,)) -> bytes:
    """The bytes that are signed: the sorted values of ``ext_fields`` but ``exclude``, then ``body``."""
    skip = set(exclude)
    fields = ext_fields or {}
    text = "".join(str(fields[k]) for k in sorted(fields, key=_java_order) if k not in skip)
    return text.encode("utf-8", "surrogatepass") + (body or b"")


def calculate(data: bytes, secret_key: str) -> str:
    """Base64(HmacSHA1(secret_key, data)), as ``AclSigner.calSignature``."""
    mac = hmac.new(secret_key.encode("utf-8", "surrogatepass"), data, hashlib.sha1).digest()
    return base64.b64encode(mac).decode("ascii")


def matches(expected: str, given: str | None) -> bool:
    """Compare signatures in constant time (Java uses String.equals; a timing oracle gains nothing here)."""
    return given is not None and hmac.compare_digest(expected.encode("ascii"), given.encode("utf-8", "replace"))


def sign(ext_fields: dict[str, str], body: bytes | None, access_key: str, secret_key: str,
         security_token: str | None = None) -> None:
    """Sign a request's ``ext_fields`` in place, as ``AclClientRPCHook.doBeforeRequest`` does."""
    ext_fields[ACCESS_KEY] = access_key
    if security_token is not None:
        ext_fields[SECURITY_TOKEN] = security_token
    ext_fields[SIGNATURE] = calculate(content(ext_fields, body), secret_key)
