"""twistd dropin: ``twistd rmq-controller``."""
from twisted.application.service import ServiceMaker

rmq_controller = ServiceMaker(
    "rmqpy controller",
    "rmqpy.controller.tap",
    "Apache RocketMQ 5-compatible controller (broker sets, elections) on PySyncObj",
    "rmq-controller",
)
