"""Connections set TCP_NODELAY, as Netty's remoting server and client do: answers sent back to
back on one connection must not wait for the peer's acknowledgement (Nagle)."""

from twisted.internet import task
from twisted.internet.interfaces import ITCPTransport
from twisted.internet.testing import StringTransport
from zope.interface import implementer

from rmqpy.remoting.protocol import RemotingProtocol


@implementer(ITCPTransport)
class _TCP(StringTransport):
    no_delay = False

    def setTcpNoDelay(self, enabled):  # noqa: N802 (Twisted's name)
        self.no_delay = enabled


class _TLSLike(StringTransport):
    """A transport over another one (Twisted's TLS protocol keeps it in ``.transport``)."""

    def __init__(self, below):
        super().__init__()
        self.transport = below


def test_tcp_nodelay_on_the_connection_and_below_tls():
    tcp = _TCP()
    RemotingProtocol(None, task.Clock()).makeConnection(tcp)
    assert tcp.no_delay is True
    below = _TCP()
    RemotingProtocol(None, task.Clock()).makeConnection(_TLSLike(below))
    assert below.no_delay is True
    RemotingProtocol(None, task.Clock()).makeConnection(StringTransport())  # not TCP: nothing to set
