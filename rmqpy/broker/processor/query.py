"""QueryMessageProcessor: QUERY_MESSAGE (12, by key through the index) and VIEW_MESSAGE_BY_ID
(33, by commit log offset). Bodies are stored records exactly as on disk (facts §4.3);
codes and remarks as RocketMQ 4.9's ``QueryMessageProcessor``."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import QueryMessageRequestHeader, QueryMessageResponseHeader, ViewMessageRequestHeader
from rmqpy.remoting.channel import Channel

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker

UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"


class QueryMessageProcessor:
    codes = (RequestCode.QUERY_MESSAGE, RequestCode.VIEW_MESSAGE_BY_ID)

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker

    def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        if request.code == RequestCode.QUERY_MESSAGE:
            return self.query_message(request)
        return self.view_message_by_id(request)

    def query_message(self, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(QueryMessageRequestHeader)
        max_num = h.maxNum
        if (request.ext_fields or {}).get(UNIQUE_MSG_QUERY_FLAG) == "true":
            max_num = self.broker.store_config.defaultQueryMaxNum
        result = self.broker.message_store.query_message(h.topic, h.key, max_num, h.beginTimestamp, h.endTimestamp)
        header = QueryMessageResponseHeader(indexLastUpdateTimestamp=result.index_last_update_timestamp,
                                            indexLastUpdatePhyoffset=result.index_last_update_phyoffset)
        if result.buffer_total_size > 0:
            return request.response(ResponseCode.SUCCESS, None, header=header, body=result.body)
        return request.response(ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct",
                                header=header)

    def view_message_by_id(self, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(ViewMessageRequestHeader)
        data = self.broker.message_store.select_one_message_by_offset(h.offset)
        if data is not None:
            return request.response(ResponseCode.SUCCESS, None, body=bytes(data))
        return request.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}")
