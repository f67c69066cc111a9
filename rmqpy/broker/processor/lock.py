"""LockBatchProcessor: LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42) for orderly consumers.

Bodies (fastjson): request ``{"clientId":..,"consumerGroup":..,"mqSet":[MessageQueue..],
"onlyThisBroker":bool}``; LOCK answers ``{"lockOKMQSet":[MessageQueue..]}``, UNLOCK answers
SUCCESS without a body (Java ``AdminBrokerProcessor.lockBatchMQ``/``unlockBatchMQ``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rmqpy.broker.rebalance_lock import MQ, LockTableFull, RebalanceLockManager
from rmqpy.broker.validation import GROUP_MAX_LENGTH, MAX_CLIENT_ID_LENGTH, is_topic_or_group_illegal, validate_group
from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.lock import LockBatchRequestBody
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.remoting.channel import Channel
from rmqpy.remoting.ratelimit import RateLimitedLogger, clip

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker


def mq_from_json(obj: Any) -> MQ:
    return (str(obj.get("topic") or ""), str(obj.get("brokerName") or ""), int(obj.get("queueId") or 0))


def mq_to_json(mq: MQ) -> dict[str, Any]:
    return {"brokerName": mq[1], "queueId": mq[2], "topic": mq[0]}


def _bad_lock_request(group: str, client_id: str, mqs: list[MQ]) -> str | None:
    """Why a lock body is refused (Java checks nothing): a group or topic that the client
    library's own validators refuse (a topic may be a retry topic of such a group), or a client ID over ``MAX_CLIENT_ID_LENGTH``."""
    bad = validate_group(group)
    if bad is not None:
        return bad
    if not client_id or len(client_id) > MAX_CLIENT_ID_LENGTH:
        return f"clientId is blank or longer than {MAX_CLIENT_ID_LENGTH}"
    for topic in {mq[0] for mq in mqs}:
        # %RETRY%/%DLQ% + a group may be longer than a topic a client may create
        if not topic or len(topic) > GROUP_MAX_LENGTH + 8 or is_topic_or_group_illegal(topic):
            return f"illegal topic in mqSet: {clip(topic, 64)}"
    return None


class LockBatchProcessor:
    log = RateLimitedLogger()  # lines any client can trigger: rate-limited per call site, values clipped
    codes = (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ)

    def __init__(self, broker: "Broker") -> None:
        self.log = self.log.on(broker.reactor)
        self.broker = broker
        self.manager: RebalanceLockManager = broker.rebalance_lock_manager

    def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        try:
            body = LockBatchRequestBody.decode(request.body)
        except ValueError as exc:  # BodyError: any JSON of the wrong shape too
            return request.response(ResponseCode.SYSTEM_ERROR, f"bad request body: {exc}")
        group, client_id, mqs = body.consumerGroup, body.clientId, body.mqSet
        bad = _bad_lock_request(group, client_id, mqs)
        if bad is not None:  # names the lock table would keep and the lock lines would quote
            return request.response(ResponseCode.SYSTEM_ERROR, f"bad request body: {bad}")
        if request.code == RequestCode.LOCK_BATCH_MQ:
            if self.broker.consumer_manager.has_left(channel, group, client_id):
                locked = []  # it said it left the group: no new locks that nobody would release
            else:
                try:
                    locked = self.manager.try_lock_batch(group, mqs, client_id)
                except LockTableFull as exc:
                    self.log.warn("lockBatchMQ from {a} refused: {why}", a=channel.remote_address, why=str(exc))
                    return request.response(ResponseCode.SYSTEM_ERROR, f"lock table full: {exc}")
            out = fastjson.dumps({"lockOKMQSet": [mq_to_json(m) for m in locked]}).encode()
            return request.response(ResponseCode.SUCCESS, None, body=out)
        self.manager.unlock_batch(group, mqs, client_id)
        return request.response(ResponseCode.SUCCESS, None)
