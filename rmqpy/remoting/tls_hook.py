"""Where TLS plugs into the servers; plaintext until the TLS module provides a wrapper."""
from __future__ import annotations

from typing import Any


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
