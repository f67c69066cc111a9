"""The 5.x ``AuthConfig`` keys of broker.properties, checked at start-up.

Java loads the provider, metadata provider and strategy classes these keys name. rmqpy has one
of each: the keys may be blank or name Java's own default classes (so one broker.properties
serves both brokers); any other class is refused at start-up rather than silently replaced.
A blank metadata provider means rmqpy's file (Java fails every request then: "The
authenticationMetadataProvider is not configured"). Both strategies behave as the stateless
one (the stateful one only caches decisions per connection). ``migrateAuthFromV1Enabled``
(turning plain_acl.yml into users and ACLs) is not implemented and refused.
"""
from __future__ import annotations

import json
from typing import Any

from rmqpy.common.properties import PropertiesError

_PKG = "org.apache.rocketmq.auth."
ACCEPTED = {
    "authenticationProvider": ("authentication.provider.DefaultAuthenticationProvider",),
    "authenticationMetadataProvider": ("authentication.provider.LocalAuthenticationMetadataProvider",),
    "authenticationStrategy": ("authentication.strategy.StatelessAuthenticationStrategy",
                               "authentication.strategy.StatefulAuthenticationStrategy"),
    "authorizationProvider": ("authorization.provider.DefaultAuthorizationProvider",),
    "authorizationMetadataProvider": ("authorization.provider.LocalAuthorizationMetadataProvider",),
    "authorizationStrategy": ("authorization.strategy.StatelessAuthorizationStrategy",
                              "authorization.strategy.StatefulAuthorizationStrategy"),
}


def auth_in_use(b: Any) -> bool:
    """Whether the broker keeps 5.x users and ACLs (either switch, or a metadata provider named)."""
    return bool(b.authenticationEnabled or b.authorizationEnabled or b.authenticationMetadataProvider.strip()
                or b.authorizationMetadataProvider.strip())


def check_auth_config(b: Any) -> None:
    for key, classes in ACCEPTED.items():
        value = str(getattr(b, key) or "").strip()
        if value and value not in {_PKG + c for c in classes}:
            raise PropertiesError(f"{key}={value}: rmqpy has its own provider and accepts only a blank value or "
                                  + " / ".join(_PKG + c for c in classes))
    if b.migrateAuthFromV1Enabled:
        raise PropertiesError("migrateAuthFromV1Enabled=true: migrating plain_acl.yml into 5.x users and ACLs is not "
                              "implemented by rmqpy; create them with mqadmin createUser/createAcl")
    if b.initAuthenticationUser.strip():
        try:
            doc = json.loads(b.initAuthenticationUser)
        except ValueError:
            doc = None
        if not isinstance(doc, dict) or not doc.get("username") or not doc.get("password"):
            raise PropertiesError('initAuthenticationUser: not a JSON object like {"username": "...", '
                                  '"password": "..."}')
