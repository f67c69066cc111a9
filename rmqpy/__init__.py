"""rmqpy: Apache RocketMQ name server and broker on Twisted."""
__version__ = "0.1.0"
