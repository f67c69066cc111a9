"""twistd dropin: ``twistd --reactor rmqpy-epoll`` (rmqpy/remoting/reactor.py)."""
from twisted.application.reactors import Reactor

rmqpy_epoll = Reactor(
    "rmqpy-epoll",
    "rmqpy.remoting.reactor",
    "epoll(4) reactor without a log context per event (rmqpy)",
)
