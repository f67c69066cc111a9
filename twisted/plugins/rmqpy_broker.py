"""twistd dropin: ``twistd rmq-broker``."""
from twisted.application.service import ServiceMaker

rmq_broker = ServiceMaker(
    "rmqpy broker",
    "rmqpy.broker.tap",
    "Apache RocketMQ-compatible broker",
    "rmq-broker",
)
