"""``rmqpy-admin``: the most used ``mqadmin`` commands, without a JVM.

Same command names, options and output as Apache RocketMQ 5.3.3's ``mqadmin`` (so scripts that
read its output keep working), for clusterList, topicList, topicRoute, topicStatus, updateTopic,
deleteTopic and brokerStatus. It speaks the remoting protocol with the blocking client of
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
from rmqpy.tools.blocking_client import BlockingClient

DEFAULT_TOPIC = "TBW102"


class AdminError(Exception):
    pass


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
            raise AdminError(f"CODE: {response.code}  DESC: {response.remark}")
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
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    admin = Admin(args.namesrvAddr)
    try:
        args.func(admin, args, print)
    except (AdminError, OSError, ConnectionError, ValueError) as exc:
        print(f"rmqpy-admin {args.command}: {exc}", file=sys.stderr)
        return 1
    finally:
        admin.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
