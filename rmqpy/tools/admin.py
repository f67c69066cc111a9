"""``rmqpy-admin``: the most used ``mqadmin`` commands, without a JVM.

Same command names, options and output as Apache RocketMQ 5.3.3's ``mqadmin`` (so scripts that
read its output keep working), for clusterList, topicList, topicRoute, topicStatus, updateTopic,
deleteTopic, brokerStatus, consumerProgress, queryMsgById and queryMsgByKey. It speaks the remoting protocol with the blocking client of
``rmqpy.tools``; it works against rmqpy and against Java name servers and brokers alike.
``-n`` defaults to ``$NAMESRV_ADDR`` as in Java. tests/interop/test_rmqpy_admin.py compares the
outputs with mqadmin's.
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
from typing import Any, Callable

from rmqpy.protocol import fastjson
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.message import MessageExt, decode_offset_msg_id, decode_records, java_string_hash
from rmqpy.protocol.versions import version_desc
from rmqpy.tools.blocking_client import BlockingClient

DEFAULT_TOPIC = "TBW102"
RETRY_PREFIX = "%RETRY%"
BODY_DIR = "/tmp/rocketmq/msgbodys"   # where mqadmin queryMsgById writes the body, as Java does


class AdminError(Exception):
    def __init__(self, text: str, code: int | None = None, remark: str | None = None) -> None:
        super().__init__(text)
        self.code, self.remark = code, remark


class Admin:
    def __init__(self, namesrv_addr: str | None, timeout: float = 5.0) -> None:
        self.namesrv_addrs = [a.strip() for a in (namesrv_addr or "").split(";") if a.strip()]
        self.timeout = timeout
        self._conns: dict[str, BlockingClient] = {}

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()

    def call(self, addr: str, code: int, fields: dict[str, Any] | None = None, ok=(ResponseCode.SUCCESS,)) -> RemotingCommand:
        if addr not in self._conns:
            try:
                self._conns[addr] = BlockingClient(addr, self.timeout)
            except OSError as exc:
                raise AdminError(f"connect to {addr} failed: {exc.strerror or exc}") from None
        request = RemotingCommand.request(code, ext_fields={k: _text(v) for k, v in (fields or {}).items()})
        response = self._conns[addr].invoke(request)
        if response.code not in ok:
            raise AdminError(f"CODE: {response.code}  DESC: {response.remark}", response.code, response.remark)
        return response

    def namesrv(self, code: int, fields: dict[str, Any] | None = None) -> RemotingCommand:
        if not self.namesrv_addrs:
            raise AdminError("no name server address: use -n host:9876 or set NAMESRV_ADDR")
        last: Exception | None = None
        for addr in self.namesrv_addrs:
            try:
                return self.call(addr, code, fields)
            except (AdminError, OSError, ConnectionError) as exc:
                last = exc
        raise AdminError(str(last))

    def cluster_info(self) -> dict[str, Any]:
        return fastjson.loads(self.namesrv(RequestCode.GET_BROKER_CLUSTER_INFO).body or b"{}")

    def route(self, topic: str) -> dict[str, Any]:
        return fastjson.loads(self.namesrv(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}).body or b"{}")

    def runtime_stats(self, addr: str) -> dict[str, str]:
        body = self.call(addr, RequestCode.GET_BROKER_RUNTIME_INFO).body
        return {str(k): str(v) for k, v in (fastjson.loads(body or b"{}").get("table") or {}).items()}

    def route_addrs(self, topic: str) -> list[str]:
        """``BrokerData.selectBrokerAddr`` of every broker in the route: the master, else any replica."""
        addrs = []
        for data in self.route(topic).get("brokerDatas") or []:
            table = {int(k): v for k, v in (data.get("brokerAddrs") or {}).items()}
            if table:
                addrs.append(table.get(0) or table[sorted(table)[0]])
        return addrs

    def master_addrs(self, cluster: str) -> list[str]:
        info = self.cluster_info()
        addrs = []
        for name in sorted(info.get("clusterAddrTable", {}).get(cluster) or []):
            data = info.get("brokerAddrTable", {}).get(name) or {}
            addr = {int(k): v for k, v in (data.get("brokerAddrs") or {}).items()}.get(0)
            if addr:
                addrs.append(addr)
        return addrs


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _perm_string(perm: int) -> str:
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")


def _human_millis(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString2``: local time, ``yyyy-MM-dd HH:mm:ss,SSS``."""
    t = datetime.datetime.fromtimestamp(ms / 1000.0)
    return t.strftime("%Y-%m-%d %H:%M:%S") + f",{ms % 1000:03d}"


# ---------------------------------------------------------------------- commands
def cluster_list(admin: Admin, args: argparse.Namespace, out: Callable[[str], None]) -> None:
    info = admin.cluster_info()
    clusters = info.get("clusterAddrTable") or {}
    names = [args.clusterName] if args.clusterName else list(clusters)
    out("%-22s  %-22s  %-4s  %-22s %-16s  %16s  %30s  %-22s  %-11s  %-12s  %-8s  %-10s" % (
        "#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)", "#OutTPS(LOAD)",
        "#Timer(Progress)", "#PCWait(ms)", "#Hour", "#SPACE", "#ACTIVATED"))
    for cluster in names:
        for broker in sorted(clusters.get(cluster) or []):
            data = (info.get("brokerAddrTable") or {}).get(broker)
            if not data:
                continue
            for bid, addr in (data.get("brokerAddrs") or {}).items():
                kv: dict[str, str] = {}
                try:
                    kv = admin.runtime_stats(addr)
                except (AdminError, OSError, ConnectionError) as exc:
                    print(f"rmqpy-admin: {addr}: {exc}", file=sys.stderr)
                tin = float((kv.get("putTps") or "0").split(" ")[0] or 0)
                tout = float((kv.get("getTransferredTps") or "0").split(" ")[0] or 0)
                earliest = kv.get("earliestMessageTimeStamp") or ""
                hour = (datetime.datetime.now().timestamp() * 1000 - int(earliest)) / 3600000.0 if earliest else 0.0
                space = float(kv.get("commitLogDiskRatio") or 0)

                timer = "%d-%d(%.1fw, %.1f, %.1f)" % (
                    _num(kv, "timerReadBehind"), _num(kv, "timerOffsetBehind"), _num(kv, "timerCongestNum") / 10000.0,
                    _num(kv, "timerEnqueueTps", float), _num(kv, "timerDequeueTps", float))
                out("%-22s  %-22s  %-4s  %-22s %-16s  %16s  %30s  %-22s  %11s  %-12s  %-8s  %10s" % (
                    cluster, broker, bid, addr, kv.get("brokerVersionDesc", ""),
                    "%9.2f(%s,%sms)" % (tin, kv.get("sendThreadPoolQueueSize"), kv.get("sendThreadPoolQueueHeadWaitTimeMills")),
                    "%9.2f(%s,%sms|%s,%sms)" % (tout, kv.get("pullThreadPoolQueueSize"),
                                                kv.get("pullThreadPoolQueueHeadWaitTimeMills"),
                                                kv.get("ackThreadPoolQueueSize", "N"),
                                                kv.get("ackThreadPoolQueueHeadWaitTimeMills", "N")),
                    timer, kv.get("pageCacheLockTimeMills"), "%2.2f" % hour, "%.4f" % space,
                    "true" if kv.get("brokerActive", "").lower() == "true" else "false"))


def _num(kv: dict[str, str], key: str, kind: type = int) -> Any:
    try:
        return kind(kv[key])
    except (KeyError, ValueError):
        return kind(0)


def topic_list(admin: Admin, args: argparse.Namespace, out: Callable[[str], None]) -> None:
    body = fastjson.loads(admin.namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body or b"{}")
    for topic in body.get("topicList") or []:
        out(topic)


def topic_route(admin: Admin, args: argparse.Namespace, out: Callable[[str], None]) -> None:
    out(fastjson.dumps(admin.route(args.topic), pretty=True))


def topic_status(admin: Admin, args: argparse.Namespace, out: Callable[[str], None]) -> None:
    route = admin.route(args.topic)
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for data in route.get("brokerDatas") or []:
        addr = {int(k): v for k, v in (data.get("brokerAddrs") or {}).items()}.get(0)
        if not addr:
            continue
        body = admin.call(addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": args.topic}).body
        for mq, offsets in (fastjson.loads(body or b"{}").get("offsetTable") or {}).items():
            rows[(mq["brokerName"], int(mq["queueId"]))] = offsets
    out("%-32s  %-4s  %-20s  %-20s    %s" % ("#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"))
    for (broker, qid), off in sorted(rows.items()):
        ts = int(off.get("lastUpdateTimestamp") or 0)
        out("%-32s  %-4d  %-20d  %-20d    %s" % (broker, qid, int(off.get("minOffset", 0)), int(off.get("maxOffset", 0)),
                                               _human_millis(ts) if ts > 0 else ""))


def update_topic(admin: Admin, args: argparse.Namespace, out: Callable[[str], None]) -> None:
    if not args.brokerAddr and not args.clusterName:
        raise AdminError("updateTopic needs -b brokerAddr or -c clusterName")
    fields = {"topic": args.topic, "defaultTopic": DEFAULT_TOPIC, "readQueueNums": args.readQueueNums,
              "writeQueueNums": args.writeQueueNums, "perm": args.perm, "topicFilterType": "SINGLE_TAG",
              "topicSysFlag": 0, "order": args.order}
    addrs = [args.brokerAddr] if args.brokerAddr else admin.master_addrs(args.clusterName)
    for addr in addrs:
        admin.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
        out(f"create topic to {addr} success.")
    out(f"TopicConfig [topicName={args.topic}, readQueueNums={args.readQueueNums}, "
        f"writeQueueNums={args.writeQueueNums}, perm={_perm_string(args.perm)}, topicFilterType=SINGLE_TAG, "
        f"topicSysFlag=0, order={_text(args.order)}, attributes={{}}]")


def delete_topic(admin: Admin, args: argparse.Namespace, out: Callable[[str], None]) -> None:
    for addr in admin.master_addrs(args.clusterName):
        admin.call(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": args.topic})
    out(f"delete topic [{args.topic}] from cluster [{args.clusterName}] success.")
    for addr in admin.namesrv_addrs:
        admin.call(addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": args.topic})
    out(f"delete topic [{args.topic}] from NameServer success.")


def broker_status(admin: Admin, args: argparse.Namespace, out: Callable[[str], None]) -> None:
    if args.brokerAddr:
        for key, value in sorted(admin.runtime_stats(args.brokerAddr).items()):
            out("%-32s: %s" % (key, value))
        return
    if not args.clusterName:
        raise AdminError("brokerStatus needs -b brokerAddr or -c clusterName")
    for addr in admin.master_addrs(args.clusterName):
        for key, value in sorted(admin.runtime_stats(addr).items()):
            out("%-24s %-32s: %s" % (addr, key, value))


# ---------------------------------------------------------------------- consumers
def _consume_stats(admin: Admin, group: str, topic: str | None) -> tuple[dict[tuple[str, str, int], dict[str, Any]], float]:
    """``DefaultMQAdminExtImpl.examineConsumeStats``: the route of the group's retry topic (then the
    topic's), GET_CONSUME_STATS on each broker of it, merged."""
    addrs: list[str] = []
    route_topics = [RETRY_PREFIX + group] + ([topic, f"{RETRY_PREFIX}{group}+{topic}"] if topic else [])
    for i, route_topic in enumerate(route_topics):
        try:
            addrs = admin.route_addrs(route_topic)
            break
        except AdminError:
            if i == len(route_topics) - 1:
                raise
    table: dict[tuple[str, str, int], dict[str, Any]] = {}
    tps = 0.0
    fields = {"consumerGroup": group, **({"topic": topic} if topic else {})}
    for addr in addrs:
        stats = fastjson.loads(admin.call(addr, RequestCode.GET_CONSUME_STATS, fields).body or b"{}")
        for mq, wrapper in (stats.get("offsetTable") or {}).items():
            table[(mq["topic"], mq["brokerName"], int(mq["queueId"]))] = wrapper
        tps += float(stats.get("consumeTps") or 0)
    if not table:
        connection = _consumer_connection(admin, group)   # raises when the group is not online
        if connection.get("messageModel") == "BROADCASTING":
            raise AdminError("Not found the consumer group consume stats, because return offset table is empty, "
                             "the consumer is under the broadcast mode")
    return table, tps


def _consumer_connection(admin: Admin, group: str) -> dict[str, Any]:
    try:
        addrs = admin.route_addrs(RETRY_PREFIX + group)
    except AdminError:
        raise AdminError("Not found the consumer group consume stats, because return offset table is empty, "
                         "maybe the consumer not online") from None
    if not addrs:
        return {}
    body = admin.call(addrs[0], RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}).body
    return fastjson.loads(body or b"{}")


def _front(text: str, size: int) -> str:
    """``UtilAll.frontStringAtLeast``."""
    return text[:size]


def _local_date(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000.0).strftime("%Y-%m-%d %H:%M:%S")


def consumer_progress(admin: Admin, args: argparse.Namespace, out: Callable[[str], None]) -> None:
    if not args.groupName:
        _all_groups_progress(admin, out)
        return
    table, tps = _consume_stats(admin, args.groupName, args.topicName)
    show_ip = (args.showClientIP or "").lower() == "true"
    owners = _queue_owners(admin, args.groupName) if show_ip else {}
    if show_ip:
        out("%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s %-20s%s" % (
            "#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Client IP", "#Diff", "#Inflight",
            "#LastTime"))
    else:
        out("%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s%s" % (
            "#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#Inflight", "#LastTime"))
    diff_total = inflight_total = 0
    for key in sorted(table):
        w = table[key]
        broker_offset, consumer_offset = int(w.get("brokerOffset", 0)), int(w.get("consumerOffset", 0))
        diff, inflight = broker_offset - consumer_offset, int(w.get("pullOffset", 0)) - consumer_offset
        diff_total, inflight_total = diff_total + diff, inflight_total + inflight
        last = int(w.get("lastTimestamp") or 0)
        last_time = _local_date(last) if last else "N/A"
        topic, broker, qid = key
        if show_ip:
            out("%-64s  %-32s  %-4d  %-20d  %-20d  %-20s %-20d %-20d %s" % (
                _front(topic, 64), _front(broker, 32), qid, broker_offset, consumer_offset, owners.get(key, "N/A"), diff,
                inflight, last_time))
        else:
            out("%-64s  %-32s  %-4d  %-20d  %-20d  %-20d %-20d %s" % (
                _front(topic, 64), _front(broker, 32), qid, broker_offset, consumer_offset, diff, inflight, last_time))
    out("")
    out("Consume TPS: %.2f" % tps)
    out("Consume Diff Total: %d" % diff_total)
    out("Consume Inflight Total: %d" % inflight_total)


def _queue_owners(admin: Admin, group: str) -> dict[tuple[str, str, int], str]:
    """Which client IP holds each queue: GET_CONSUMER_RUNNING_INFO of every connected client, as
    ``getMessageQueueAllocationResult`` (its errors are only logged there, so they are ignored here)."""
    owners: dict[tuple[str, str, int], str] = {}
    try:
        connection = _consumer_connection(admin, group)
        addr = admin.route_addrs(RETRY_PREFIX + group)[0]
        for conn in connection.get("connectionSet") or []:
            client_id = str(conn.get("clientId") or "")
            body = admin.call(addr, RequestCode.GET_CONSUMER_RUNNING_INFO,
                              {"consumerGroup": group, "clientId": client_id, "jstackEnable": False}).body
            for mq in (fastjson.loads(body or b"{}").get("mqTable") or {}):
                owners[(mq["topic"], mq["brokerName"], int(mq["queueId"]))] = client_id.split("@")[0]
    except (AdminError, OSError, ConnectionError, ValueError, KeyError, IndexError):
        pass   # mqadmin logs these to its tools.log only: a queue without an owner shows N/A
    return owners


def _all_groups_progress(admin: Admin, out: Callable[[str], None]) -> None:
    out("%-64s  %-6s  %-24s %-5s  %-14s  %-7s  %s" % ("#Group", "#Count", "#Version", "#Type", "#Model", "#TPS",
                                                       "#Diff Total"))
    topics = fastjson.loads(admin.namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body or b"{}")
    for topic in topics.get("topicList") or []:
        if not topic.startswith(RETRY_PREFIX):
            continue
        group = topic[len(RETRY_PREFIX):]
        if "+" in group and len(group.split("+")) == 2:   # a pop retry topic (KeyBuilder.parseGroup)
            group = group.split("+")[0]
        tps, diff_total, count, version, ctype, model = 0, 0, 0, "OFFLINE", "", ""
        try:
            table, tps_f = _consume_stats(admin, group, None)
            tps = int(tps_f)
            diff_total = sum(int(w.get("brokerOffset", 0)) - int(w.get("consumerOffset", 0)) for w in table.values())
        except (AdminError, OSError, ConnectionError, ValueError):
            pass   # an offline group (CONSUMER_NOT_ONLINE): mqadmin logs it to tools.log, not to the terminal
        try:
            connection = _consumer_connection(admin, group)
            conns = connection.get("connectionSet") or []
            count = len(conns)
            if count:
                passive = connection.get("consumeType") != "CONSUME_ACTIVELY"
                version = version_desc(min(int(c.get("version", 0)) for c in conns))
                ctype = "PUSH" if passive else "PULL"
                model = str(connection.get("messageModel") or "") if passive else ""
        except (AdminError, OSError, ConnectionError, ValueError):
            pass   # the same: the row says OFFLINE
        out("%-64s  %-6d  %-24s %-5s  %-14s  %-7d  %d" % (_front(group, 64), count, version, ctype, model, tps,
                                                          diff_total))


# ---------------------------------------------------------------------- messages
def _query(admin: Admin, topic: str, key: str, max_num: int, begin: int, end: int, uniq: bool) -> list[MessageExt]:
    """``MQAdminImpl.queryMessage``: QUERY_MESSAGE on every broker of the route, then only the records
    whose key (or unique id) really matches, since the index is a hash."""
    found: list[MessageExt] = []
    fields = {"topic": topic, "key": key, "maxNum": max_num, "beginTimestamp": begin, "endTimestamp": end,
              "_UNIQUE_KEY_QUERY": uniq}
    for addr in admin.route_addrs(topic):
        response = admin.call(addr, RequestCode.QUERY_MESSAGE, fields, ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        if response.code != ResponseCode.SUCCESS or not response.body:
            continue
        for msg in decode_records(response.body):
            if uniq:
                if _client_msg_id(msg) == key:
                    found.append(msg)
            elif key in (msg.keys or "").split(" ") and msg.topic == topic:
                found.append(msg)
    return found


def _client_msg_id(msg: MessageExt) -> str:
    """``MessageClientExt.getMsgId``: the producer's unique id when it set one, else the offset id."""
    return msg.uniq_key or msg.msg_id


def query_msg_by_key(admin: Admin, args: argparse.Namespace, out: Callable[[str], None]) -> None:
    msgs = _query(admin, args.topic, args.msgKey, args.maxNum, args.beginTimestamp, args.endTimestamp, uniq=False)
    if not msgs:
        raise AdminError("query message by key finished, but no message.")
    out("%-50s %4s %40s" % ("#Message ID", "#QID", "#Offset"))
    for msg in msgs:
        out("%-50s %4d %40d" % (_client_msg_id(msg), msg.queue_id, msg.queue_offset))


def query_msg_by_id(admin: Admin, args: argparse.Namespace, out: Callable[[str], None]) -> None:
    if args.consumerGroup or args.clientId or args.sendMessage:
        raise AdminError("-g/-d (push to a client) and -s (resend) are not supported by rmqpy-admin; use mqadmin")
    for msg_id in [m.strip() for m in args.msgId.split(",") if m.strip()]:
        _print_msg(admin, _find_by_id(admin, args.topic, msg_id), args.bodyFormat, out)


def _find_by_id(admin: Admin, topic: str, msg_id: str) -> MessageExt | None:
    """``DefaultMQAdminExtImpl.queryMessage``: an offset id is looked up by commit log offset on the
    broker it names; anything else as a producer's unique id through the index (last 3 days)."""
    try:   # a unique id parses as an offset id too (and then names no broker): Java falls back likewise
        (ip, port), offset = decode_offset_msg_id(msg_id)
        if 0 < port < 65536:
            body = admin.call(f"{ip}:{port}", RequestCode.VIEW_MESSAGE_BY_ID, {"topic": topic, "offset": offset}).body
            msgs = list(decode_records(body or b""))
            if msgs:
                return msgs[0]
    except (AdminError, OSError, ConnectionError, ValueError):
        pass
    now = int(datetime.datetime.now().timestamp() * 1000)
    msgs = _query(admin, topic, msg_id, 32, now - 3 * 24 * 3600 * 1000, 2**63 - 1, uniq=True)
    return msgs[0] if msgs else None


def _java_map_string(props: dict[str, str]) -> str:
    """``HashMap.toString`` of the decoder's ``new HashMap<>(128)``: bucket order, then insertion."""
    def bucket(key: str) -> int:
        h = java_string_hash(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & 127
    keys = sorted(props, key=bucket) if len(props) <= 96 else list(props)
    return "{" + ", ".join(f"{k}={props[k]}" for k in keys) + "}"


def _print_msg(admin: Admin, msg: MessageExt | None, charset: str | None, out: Callable[[str], None]) -> None:
    if msg is None:
        out("\nMessage not found!")
        return
    name = _client_msg_id(msg)
    if os.path.basename(name) != name or name in ("", ".", ".."):
        raise AdminError(f"message id {name!r} is not a file name")
    os.makedirs(BODY_DIR, exist_ok=True)
    body_path = f"{BODY_DIR}/{name}"
    with open(body_path, "wb") as f:
        f.write(msg.body or b"")
    for label, value in (("OffsetID:", msg.msg_id), ("Topic:", msg.topic), ("Tags:", f"[{msg.tags}]"),
                         ("Keys:", f"[{msg.keys}]"), ("Queue ID:", msg.queue_id), ("Queue Offset:", msg.queue_offset),
                         ("CommitLog Offset:", msg.commit_log_offset), ("Reconsume Times:", msg.reconsume_times),
                         ("Born Timestamp:", _human_millis(msg.born_timestamp)),
                         ("Store Timestamp:", _human_millis(msg.store_timestamp)),
                         ("Born Host:", "%s:%d" % msg.born_host), ("Store Host:", "%s:%d" % msg.store_host),
                         ("System Flag:", msg.sys_flag), ("Properties:", _java_map_string(msg.properties)),
                         ("Message Body Path:", body_path)):
        out("%-20s %s" % (label, value))
    if charset:
        out("%-20s %s" % ("Message Body:", (msg.body or b"").decode(charset, errors="replace")))
    tracks = _message_tracks(admin, msg)
    out("\n\n" + ("WARN: No Consumer" if not tracks else "\n".join(tracks)))


def _message_tracks(admin: Admin, msg: MessageExt) -> list[str]:
    """``messageTrackDetail``: for each group that consumes the topic, whether it consumed the message."""
    addrs = admin.route_addrs(msg.topic)
    body = admin.call(addrs[0], RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": msg.topic}).body if addrs else b""
    tracks = []
    for group in sorted(fastjson.loads(body or b"{}").get("groupList") or []):
        track, desc = "UNKNOWN", "null"
        try:
            connection = _consumer_connection(admin, group)
            if connection.get("consumeType") == "CONSUME_ACTIVELY":
                track = "PULL"
            else:
                table, _ = _consume_stats(admin, group, None)
                consumed = any(t == msg.topic and q == msg.queue_id and int(w.get("consumerOffset", 0)) > msg.queue_offset
                               for (t, _b, q), w in table.items())
                track = "CONSUMED" if consumed else "NOT_CONSUME_YET"
                if consumed:
                    tags = ((connection.get("subscriptionTable") or {}).get(msg.topic) or {}).get("tagsSet")
                    if tags and msg.tags not in tags and "*" not in tags:
                        track = "CONSUMED_BUT_FILTERED"
        except AdminError as exc:
            if exc.code == ResponseCode.CONSUMER_NOT_ONLINE or "not online" in str(exc):
                track = "NOT_ONLINE"
            desc = f"CODE:{exc.code} DESC:{exc.remark}" if exc.code is not None else str(exc)
        tracks.append(f"MessageTrack [consumerGroup={group}, trackType={track}, exceptionDesc={desc}]")
    return tracks


def _bool(text: str) -> bool:
    return text.strip().lower() == "true"


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="rmqpy-admin", description=__doc__.split("\n\n")[0])
    sub = top.add_subparsers(dest="command", required=True, metavar="command")

    def command(name: str, func: Callable[..., None], help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.add_argument("-n", "--namesrvAddr", default=os.environ.get("NAMESRV_ADDR"),
                       help="name server address list, e.g. '192.168.0.1:9876;192.168.0.2:9876'")
        p.set_defaults(func=func)
        return p

    p = command("clusterList", cluster_list, "List cluster infos")
    p.add_argument("-c", "--clusterName")
    command("topicList", topic_list, "Fetch all topic list from name server")
    p = command("topicRoute", topic_route, "Examine topic route info")
    p.add_argument("-t", "--topic", required=True)
    p = command("topicStatus", topic_status, "Examine topic Status info")
    p.add_argument("-t", "--topic", required=True)
    p = command("updateTopic", update_topic, "Update or create topic")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-b", "--brokerAddr")
    p.add_argument("-c", "--clusterName")
    p.add_argument("-r", "--readQueueNums", type=int, default=8)
    p.add_argument("-w", "--writeQueueNums", type=int, default=8)
    p.add_argument("-p", "--perm", type=int, default=6)
    p.add_argument("-o", "--order", type=_bool, default=False)
    p = command("deleteTopic", delete_topic, "Delete topic from broker and NameServer")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-c", "--clusterName", required=True)
    p = command("brokerStatus", broker_status, "Fetch broker runtime status data")
    p.add_argument("-b", "--brokerAddr")
    p.add_argument("-c", "--clusterName")
    p = command("consumerProgress", consumer_progress, "Query consumer's progress, speed.")
    p.add_argument("-g", "--groupName")
    p.add_argument("-t", "--topicName")
    p.add_argument("-s", "--showClientIP")
    p.add_argument("-c", "--cluster")
    p = command("queryMsgById", query_msg_by_id, "Query Message by Id.")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-i", "--msgId", required=True)
    p.add_argument("-g", "--consumerGroup")
    p.add_argument("-d", "--clientId")
    p.add_argument("-s", "--sendMessage")
    p.add_argument("-u", "--unitName")
    p.add_argument("-f", "--bodyFormat")
    p.add_argument("-c", "--cluster")
    p = command("queryMsgByKey", query_msg_by_key, "Query Message by Key.")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-k", "--msgKey", required=True)
    p.add_argument("-b", "--beginTimestamp", type=int, default=0)
    p.add_argument("-e", "--endTimestamp", type=int, default=2**63 - 1)
    p.add_argument("-m", "--maxNum", type=int, default=64)
    p.add_argument("-c", "--cluster")
    return top


class _StdoutClosed(Exception):
    """Whoever read stdout went away (``rmqpy-admin topicList | head -1``)."""


def _out(line: str) -> None:
    """Print a line of a command's output; a closed stdout is told apart from a broken connection to a
    server (both are BrokenPipeError), which is an error of the command."""
    try:
        print(line)
    except BrokenPipeError:
        raise _StdoutClosed() from None


def _run(args: argparse.Namespace) -> int:
    admin = Admin(args.namesrvAddr)
    try:
        args.func(admin, args, _out)
    except (AdminError, OSError, ConnectionError, ValueError) as exc:
        print(f"rmqpy-admin {args.command}: {exc}", file=sys.stderr)
        return 1
    finally:
        admin.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        try:
            return _run(parser().parse_args(argv))
        finally:   # the buffered rest now, not in the interpreter's exit, where it would print a traceback
            sys.stdout.flush()
    except (_StdoutClosed, BrokenPipeError):
        # as Python's documentation advises (signal module, "Note on SIGPIPE"): stdout goes to /dev/null
        # so that nothing is written at exit, and the exit code is 1, without a word on stderr; mqadmin
        # (Java's PrintStream) ignores the closed pipe too
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 1


if __name__ == "__main__":
    sys.exit(main())
