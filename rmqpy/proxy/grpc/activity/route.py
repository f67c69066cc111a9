"""QueryRoute and QueryAssignment (the proxy's ``RouteActivity``): routes and assignments name this
broker, at the address the client reached it on, on the gRPC port."""
from __future__ import annotations

from typing import Any

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from rmqpy.broker.topic_attributes import topic_message_type
from rmqpy.protocol.bodies.topic import PERM_READ, PERM_WRITE
from rmqpy.proxy.grpc import validate
from rmqpy.proxy.grpc.context import ActivityContext
from rmqpy.proxy.grpc.convert import Code, resource, status

_SCHEMES = (pb.AddressScheme.IPv4, pb.AddressScheme.IPv6, pb.AddressScheme.DOMAIN_NAME)


def permission(perm: int) -> int:
    r, w = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    if r and w:
        return pb.Permission.READ_WRITE
    return pb.Permission.READ if r else pb.Permission.WRITE if w else pb.Permission.NONE


def accept_types(tc: Any) -> list[int]:
    """TopicMessageType from the ``message.type`` attribute; a topic without one is MIXED here
    (Java: NORMAL), so that one topic takes every message type as the 4.x broker did. PRIORITY is
    5.4.0's (``RouteActivity.parseTopicMessageType``); MIXED does not list it there either."""
    kind = topic_message_type(tc.attributes, "MIXED")
    types = {"NORMAL": [pb.MessageType.NORMAL], "FIFO": [pb.MessageType.FIFO],
             "DELAY": [pb.MessageType.DELAY], "TRANSACTION": [pb.MessageType.TRANSACTION],
             "PRIORITY": [pb.MessageType.PRIORITY]}
    return types.get(kind, [pb.MessageType.NORMAL, pb.MessageType.FIFO, pb.MessageType.DELAY,
                            pb.MessageType.TRANSACTION])


class RouteActivity:
    def __init__(self, ctx: ActivityContext) -> None:
        self.ctx = ctx

    def endpoint_broker(self, endpoints: Any) -> Any:
        """This broker as the route names it: the host the client used, on the gRPC port."""
        bc = self.ctx.broker.broker_config
        ep = pb.Endpoints(scheme=pb.AddressScheme.IPv4)
        hosts = [a.host for a in endpoints.addresses if a.host][:8]
        if hosts and endpoints.scheme in _SCHEMES:
            ep.scheme = endpoints.scheme
        for host in hosts or [bc.brokerIP1]:
            ep.addresses.add(host=host[:255], port=self.ctx.grpc_port)
        return pb.Broker(name=bc.brokerName, id=0, endpoints=ep)

    def query_route(self, req: Any) -> Any:
        tc = self.ctx.topic(req.topic)
        broker = self.endpoint_broker(req.endpoints)
        perm = tc.perm & self.ctx.broker.broker_config.brokerPermission
        # RouteActivity.genMessageQueueFromQueueData: read-only, write-only, then read-write queues
        r = w = rw = 0
        if perm & PERM_READ and perm & PERM_WRITE:
            rw = min(tc.readQueueNums, tc.writeQueueNums)
            r, w = tc.readQueueNums - rw, tc.writeQueueNums - rw
        elif perm & PERM_WRITE:
            w = tc.writeQueueNums
        elif perm & PERM_READ:
            r = tc.readQueueNums
        kinds = [pb.Permission.READ] * r + [pb.Permission.WRITE] * w + [pb.Permission.READ_WRITE] * rw
        if not kinds:
            kinds = [pb.Permission.NONE] * max(1, tc.readQueueNums, tc.writeQueueNums)
        accept = accept_types(tc)
        queues = [pb.MessageQueue(topic=resource(tc.topicName), id=i, permission=kind, broker=broker,
                                  accept_message_types=accept) for i, kind in enumerate(kinds)]
        return spb.QueryRouteResponse(status=status(Code.OK), message_queues=queues)

    def query_assignment(self, req: Any) -> Any:
        validate.check_topic(req.topic.name)  # validateTopicAndConsumerGroup, then the route
        self.ctx.group(req.group)
        tc = self.ctx.topic(req.topic)
        perm = tc.perm & self.ctx.broker.broker_config.brokerPermission
        if not perm & PERM_READ or tc.readQueueNums <= 0:
            return spb.QueryAssignmentResponse(status=status(Code.FORBIDDEN, "no readable queue"))
        mq = pb.MessageQueue(topic=resource(tc.topicName), id=-1, permission=permission(perm),
                             broker=self.endpoint_broker(req.endpoints))
        return spb.QueryAssignmentResponse(status=status(Code.OK), assignments=[pb.Assignment(message_queue=mq)])
