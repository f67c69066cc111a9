"""twistd dropin: ``twistd rmq-namesrv``."""
from twisted.application.service import ServiceMaker

rmq_namesrv = ServiceMaker(
    "rmqpy name server",
    "rmqpy.namesrv.tap",
    "Apache RocketMQ-compatible name server",
    "rmq-namesrv",
)
