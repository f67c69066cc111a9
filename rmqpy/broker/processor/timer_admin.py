"""TimerAdminProcessor: what a RocketMQ 5 slave asks its master about timer messages (Java
``AdminBrokerProcessor.getTimerCheckPoint`` / ``getTimerMetrics``).

GET_TIMER_CHECK_POINT (60) answers the checkpoint's 56 bytes (rmqpy/broker/timer_checkpoint.py),
GET_TIMER_METRICS (61) the messages parked per real topic as JSON. With ``timerWheelEnable=false``
Java has no timer store and answers SYSTEM_ERROR with its remarks; so does rmqpy.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rmqpy.broker.timer_checkpoint import timer_metrics_body
from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.topic import DataVersion
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from rmqpy.broker.timer import TimerMessageService


class TimerAdminProcessor:
    codes = (RequestCode.GET_TIMER_CHECK_POINT, RequestCode.GET_TIMER_METRICS)

    def __init__(self, timer: "TimerMessageService", store_config: Any) -> None:
        self.timer = timer
        self.store_config = store_config
        self.metrics_version = DataVersion(timestamp=0)  # moves when the counts told do (a slave compares it)
        self._counts_told: dict[str, int] | None = None

    def process_request(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        if request.code == RequestCode.GET_TIMER_CHECK_POINT:
            if not self.store_config.timerWheelEnable:
                return request.response(ResponseCode.SYSTEM_ERROR, "The checkpoint is null")
            return request.response(ResponseCode.SUCCESS, body=self.timer.checkpoint().encode())
        if not self.store_config.timerWheelEnable:
            return request.response(ResponseCode.SYSTEM_ERROR, "The timer message store is null")
        timing = self.timer.timing_counts()
        counts = {topic: n for topic, (n, _stamp) in timing.items()}
        if counts != self._counts_told:
            self._counts_told = counts
            self.metrics_version.next_version(self.timer.broker.now_ms())
        body = fastjson.dumps(timer_metrics_body(timing, self.metrics_version), ascii_only=True)
        return request.response(ResponseCode.SUCCESS, body=body.encode())
