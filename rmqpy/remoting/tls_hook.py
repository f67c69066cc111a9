"""Where TLS plugs into the servers; plaintext until the TLS module provides a wrapper.

Both taps take the ``tls.*`` keys the same way: from their ``-c`` file, then from ``-D key=value``
options (Java reads them as JVM system properties), which win.
"""
from __future__ import annotations

from typing import Any, Mapping

from twisted.python import usage


class TlsOptions(usage.Options):
    """``-D tls.key=value`` for a tap's options (``self["tlsProps"]``)."""

    def opt_D(self, value: str) -> None:  # noqa: N802 -- TLS: -D tls.key=value, as JVM system properties
        """Set a tls.* key as a Java system property would (repeatable); overrides the -c file."""
        key, _, val = value.partition("=")
        self.setdefault("tlsProps", {})[key.strip()] = val.strip()


def tls_properties(file_props: Mapping[str, str], options: Mapping[str, Any]) -> dict[str, str]:
    """The ``tls.*`` keys of the config file, then the ``-D`` overrides of ``options``."""
    return {**{k: v for k, v in file_props.items() if k.startswith("tls.")}, **options.get("tlsProps", {})}


def server_wrapper(props: dict[str, str]) -> Any:
    """A factory wrapper for ``tls.server.mode`` in ``props``, or None for plaintext."""
    try:
        from rmqpy.remoting import tls
    except ImportError:
        return None
    return tls.server_factory_wrapper(props)


def client_endpoint_factory(props: dict[str, str]) -> Any:
    """``RemotingClient(endpoint_factory=...)`` for ``tls.enable=true`` in ``props``, or None for plaintext."""
    try:
        from rmqpy.remoting import tls
    except ImportError:
        return None
    return tls.client_endpoint_factory(props)
