"""AdminBrokerProcessor, one family of its requests: consumer and delay offsets: tables, reset, clone, correction, status."""
from __future__ import annotations

from typing import Any

from twisted.internet import defer

from rmqpy.broker.processor.admin_base import JAVA_LONG_MAX, V3_0_7_SNAPSHOT, AdminBase, version_desc
from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies import admin as admin_bodies
from rmqpy.protocol.codes import MQVersion, RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.admin import (
    CloneGroupOffsetRequestHeader,
    GetConsumerStatusRequestHeader,
    QueryCorrectionOffsetHeader,
    ResetOffsetRequestHeader,
)
from rmqpy.remoting.channel import Channel


class OffsetAdmin(AdminBase):
    def get_all_consumer_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        content = fastjson.dumps(self.broker.consumer_offset_manager.encode())
        if not content:
            return request.response(ResponseCode.SYSTEM_ERROR, "No consumer offset in this broker")
        return self._ok(request, content.encode())

    def get_all_delay_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        content = fastjson.dumps(self.broker.delay_offset_manager.encode())
        if not content:
            return request.response(ResponseCode.SYSTEM_ERROR, "No delay offset in this broker")
        return self._ok(request, content.encode())

    def reset_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """``Broker2Client.resetOffset``: compute the offsets, tell every consumer of the group.

        A group with an offset for every queue but no consumer online answers CONSUMER_NOT_ONLINE (206),
        on which mqadmin resetOffsetByTime falls back to the offline reset (GET_CONSUME_STATS, then
        UPDATE_CONSUMER_OFFSET per queue). A missing topic: SYSTEM_ERROR for 4.x requesters,
        TOPIC_NOT_EXIST from V5_0_0 on (as each Java generation answers). Java 5.x's default
        server-side reset (useServerSideResetOffset) is not implemented: this is its Broker2Client path."""
        b = self.broker
        h = request.decode_header(ResetOffsetRequestHeader)
        tc = b.topic_config_manager.select(h.topic)
        if tc is None:
            code = ResponseCode.TOPIC_NOT_EXIST if request.version >= MQVersion.V5_0_0 else ResponseCode.SYSTEM_ERROR
            return request.response(code,
                                    f"[reset-offset] reset offset failed, no topic in this broker. topic={h.topic}")
        store = b.message_store
        table = {}
        for i in self._queues(tc.writeQueueNums):
            consumer_offset = b.consumer_offset_manager.query_offset(h.group, h.topic, i)
            if consumer_offset == -1:
                return request.response(ResponseCode.SYSTEM_ERROR, f"THe consumer group <{h.group}> not exist")
            if h.timestamp == -1:
                ts_offset = store.get_max_offset_in_queue(h.topic, i)
            else:
                ts_offset = store.get_offset_in_queue_by_time(h.topic, i, h.timestamp)  # LOWER, as Broker2Client
            if ts_offset < 0:
                ts_offset = 0
            table[self._mq(h.topic, i)] = ts_offset if (h.isForce or ts_offset < consumer_offset) \
                else consumer_offset
        body = fastjson.dumps({"offsetTable": table}).encode()
        info = b.consumer_manager.get(h.group)
        if info is None or not info.channels:
            return request.response(ResponseCode.CONSUMER_NOT_ONLINE,
                                    f"Consumer not online, so can not reset offset, Group: {h.group} "
                                    f"Topic: {h.topic} Timestamp: {h.timestamp}")
        for client in list(info.channels.values()):
            if client.version < V3_0_7_SNAPSHOT:
                return request.response(ResponseCode.SYSTEM_ERROR,
                                        f"the client does not support this feature. version="
                                        f"{version_desc(client.version)}")
        for client in list(info.channels.values()):
            header = ResetOffsetRequestHeader(topic=h.topic, group=h.group, timestamp=h.timestamp,
                                              isForce=bool(h.isForce))
            push = RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, header, body)
            try:
                client.channel.invoke_oneway(push)
                self.log.info("[reset-offset] reset offset success. topic={t}, group={g}, clientId={c}",
                              t=h.topic, g=h.group, c=client.client_id)
            except Exception:
                self.log.failure("[reset-offset] reset offset exception. topic={t}, group={g}", t=h.topic, g=h.group)
        return self._ok(request, body)

    def clone_group_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """CLONE_GROUP_OFFSET: copy srcGroup's offsets of ``topic`` to destGroup."""
        b = self.broker
        h = request.decode_header(CloneGroupOffsetRequestHeader)
        if not (h.topic or "").strip():
            topics = b.consumer_offset_manager.which_topics_by_group(h.srcGroup)
        else:
            topics = {h.topic or ""}  # h.topic is not empty here
        com = b.consumer_offset_manager
        for topic in sorted(topics):
            if b.topic_config_manager.select(topic) is None:
                self.log.warn("[cloneGroupOffset], topic config not exist, {t}", t=topic)
                continue
            if not h.offline:
                info = b.consumer_manager.get(h.srcGroup)
                if info is not None and info.subscriptions and info.find_subscription(topic) is None:
                    self.log.warn("[cloneGroupOffset], the consumer group[{g}], topic[{t}] not exist",
                                  g=h.srcGroup, t=topic)
                    continue
            # as Java: the header's topic (not the loop's) names the table copied
            src = com.table.get(f"{h.topic}@{h.srcGroup}")
            if src is not None:
                com.table[f"{h.topic}@{h.destGroup}"] = dict(src)
                com.dirty = True
        return self._ok(request)

    def query_correction_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """QUERY_CORRECTION_OFFSET: per queue, the smallest offset any group (but filterGroups) has
        committed at or above the queue's minimum; Long.MAX_VALUE where compareGroup is behind it.

        Java's ``queryMinOffsetInAllGroup`` also deletes the filtered groups' offsets as a side
        effect; that is not reproduced: they are only left out.
        """
        b = self.broker
        h = request.decode_header(QueryCorrectionOffsetHeader)
        skip = {g for g in (h.filterGroups or "").split(",") if g} if (h.filterGroups or "").strip() else set()
        mins: dict[int, int] = {}
        for key, queues in b.consumer_offset_manager.table.items():
            topic, _, group = key.partition("@")
            if topic != h.topic or group in skip:
                continue
            for qid, offset in queues.items():
                if offset >= b.message_store.get_min_offset_in_queue(h.topic, qid):
                    mins[qid] = min(offset, mins.get(qid, offset))
        compare = b.consumer_offset_manager.table.get(f"{h.topic}@{h.compareGroup}")
        for qid, offset in (compare or {}).items():
            if qid in mins:
                mins[qid] = JAVA_LONG_MAX if mins[qid] > offset else mins[qid]
        return self._ok(request, fastjson.dumps(admin_bodies.correction_offset_body(mins)).encode())

    def get_consumer_status(self, channel: Channel, request: RemotingCommand) -> Any:
        """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (``Broker2Client.getConsumeStatus``): ask every consumer
        of the group (or only ``clientAddr``'s client id) with GET_CONSUMER_STATUS_FROM_CLIENT and
        gather their offset tables by client id."""
        b = self.broker
        h = request.decode_header(GetConsumerStatusRequestHeader)
        self.log.info("[get-consumer-status] get consumer status by {a}. topic={t}, group={g}",
                      a=channel.remote_address, t=h.topic, g=h.group)
        info = b.consumer_manager.get(h.group)
        clients = list(info.channels.values()) if info is not None else []
        if not clients:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"No Any Consumer online in the consumer group: [{h.group}]")
        for client in clients:
            if client.version < V3_0_7_SNAPSHOT:
                return request.response(ResponseCode.SYSTEM_ERROR, f"the client does not support this feature. "
                                        f"version={version_desc(client.version)}")
        origin = (h.clientAddr or "").strip()
        if origin:
            clients = [c for c in clients if c.client_id == origin][:1]
        table: dict[str, Any] = {}
        calls = []
        for client in clients:
            ask = RemotingCommand.request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT,
                                          GetConsumerStatusRequestHeader(topic=h.topic, group=h.group))
            d = defer.maybeDeferred(client.channel.invoke, ask, 5.0)

            def answered(resp: RemotingCommand, client_id: str = client.client_id) -> None:
                if resp.code == ResponseCode.SUCCESS and resp.body:
                    obj = fastjson.loads(resp.body.decode("utf-8"))
                    table[client_id] = dict(obj.get("messageQueueTable") or {})

            def failed(f: Any, client_id: str = client.client_id) -> None:
                self.log.error("[get-consumer-status] get consumer status exception. topic={t}, group={g}, "
                               "error={e}", t=h.topic, g=h.group, e=f.getErrorMessage())

            calls.append(d.addCallbacks(answered, failed))

        def reply(_: Any) -> RemotingCommand:
            ordered = {c.client_id: table[c.client_id] for c in clients if c.client_id in table}
            return self._ok(request, fastjson.dumps(admin_bodies.consumer_status_body(ordered)).encode())

        return defer.gatherResults(calls).addCallback(reply)
