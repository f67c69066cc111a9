"""Bodies of the admin answers added for mqadmin's statistics and queue commands.

Each builder returns the object fastjson would write for the Java class (bean properties,
getter-only ones included, null ones left out); :func:`rmqpy.protocol.fastjson.dumps`
sorts and encodes it. MessageQueue map keys are :class:`fastjson.ObjectKey`.
"""
from __future__ import annotations

import time
from typing import Any, Iterable, Mapping

from rmqpy.protocol import fastjson


def message_queue(topic: str, broker_name: str, queue_id: int) -> dict[str, Any]:
    return {"brokerName": broker_name, "queueId": int(queue_id), "topic": topic}


def mq_key(topic: str, broker_name: str, queue_id: int) -> fastjson.ObjectKey:
    return fastjson.ObjectKey(message_queue(topic, broker_name, queue_id))


def format_date_ms(ms: int) -> str:
    """``UtilAll.formatDate(new Date(ms), "yyyy-MM-dd#HH:mm:ss:SSS")`` in the broker's time zone."""
    seconds, millis = divmod(int(ms), 1000)
    return time.strftime("%Y-%m-%d#%H:%M:%S", time.localtime(seconds)) + f":{millis:03d}"


def queue_time_span(mq: Mapping[str, Any], min_ts: int, max_ts: int, consume_ts: int,
                    delay_time: int) -> dict[str, Any]:
    """``QueueTimeSpan`` with its three ``*Str`` getters."""
    return {"consumeTimeStamp": consume_ts, "consumeTimeStampStr": format_date_ms(consume_ts),
            "delayTime": delay_time, "maxTimeStamp": max_ts, "maxTimeStampStr": format_date_ms(max_ts),
            "messageQueue": dict(mq), "minTimeStamp": min_ts, "minTimeStampStr": format_date_ms(min_ts)}


def query_consume_time_span_body(spans: Iterable[dict[str, Any]]) -> dict[str, Any]:
    return {"consumeTimeSpanSet": list(spans)}


def consume_queue_data(physic_offset: int, physic_size: int, tags_code: int, *, eval_: bool = False,
                       extend_data_json: str | None = None, bit_map: str | None = None,
                       msg: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"eval": eval_, "physicOffset": physic_offset, "physicSize": physic_size,
                           "tagsCode": tags_code}
    for key, value in (("extendDataJson", extend_data_json), ("bitMap", bit_map), ("msg", msg)):
        if value is not None:
            out[key] = value
    return out


def query_consume_queue_body(max_index: int, min_index: int, queue_data: list[dict[str, Any]] | None,
                             subscription_data: Any = None, filter_data: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"maxQueueIndex": max_index, "minQueueIndex": min_index}
    if queue_data is not None:
        out["queueData"] = queue_data
    if subscription_data is not None:
        out["subscriptionData"] = subscription_data
    if filter_data is not None:
        out["filterData"] = filter_data
    return out


def broker_stats_data(minute: dict[str, Any], hour: dict[str, Any], day: dict[str, Any]) -> dict[str, Any]:
    """``BrokerStatsData``: one ``BrokerStatsItem`` (sum, tps, avgpt) per window."""
    return {"statsDay": day, "statsHour": hour, "statsMinute": minute}


def consume_stats_list(broker_addr: str, stats: list[dict[str, list[dict[str, Any]]]],
                       total_diff: int) -> dict[str, Any]:
    """``ConsumeStatsList`` (GET_BROKER_CONSUME_STATS): per group, one ConsumeStats per topic."""
    return {"brokerAddr": broker_addr, "consumeStatsList": stats, "totalDiff": total_diff}


def consume_stats(offset_table: Mapping[Any, Mapping[str, Any]], consume_tps: float = 0.0) -> dict[str, Any]:
    return {"consumeTps": float(consume_tps), "offsetTable": dict(offset_table)}


def correction_offset_body(offsets: Mapping[int, int]) -> dict[str, Any]:
    return {"correctionOffsets": {int(q): int(o) for q, o in offsets.items()}}


def consumer_status_body(consumer_table: Mapping[str, Mapping[Any, int]]) -> dict[str, Any]:
    """``GetConsumerStatusBody`` as the broker answers INVOKE_BROKER_TO_GET_CONSUMER_STATUS."""
    return {"consumerTable": {k: dict(v) for k, v in consumer_table.items()}, "messageQueueTable": {}}


def consumer_running_info(jstack: str) -> dict[str, Any]:
    """A ConsumerRunningInfo holding only a thread stack trace: what the 5.x proxy answers for a
    gRPC consumer (``GrpcClientChannel``'s ``reportThreadStackTrace``), empty tables otherwise."""
    return {"jstack": jstack, "mqPopTable": {}, "mqTable": {}, "properties": {}, "statusTable": {},
            "subscriptionSet": [], "userConsumerInfo": {}}


def consume_message_directly_result(consume_result: str | None, remark: str) -> dict[str, Any]:
    """A ConsumeMessageDirectlyResult (not ordered, auto commit, no time spent), ``consumeResult``
    left out when None."""
    return {"order": False, "autoCommit": True, "consumeResult": consume_result, "remark": remark,
            "spentTimeMills": 0}
