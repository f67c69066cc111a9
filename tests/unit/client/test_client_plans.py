"""rmqpy.client without a network: the requests it builds and the choices its plans make, driven
by a scripted transport (the interop tests check the same against real brokers)."""
from __future__ import annotations

import zlib
from typing import Callable

import pytest

from rmqpy.acl import signature
from rmqpy.client import ClientError, Message, MessageQueue, PullStatus, SendStatus
from rmqpy.client import requests as R
from rmqpy.client.blocking import run
from rmqpy.client.core import Call, ConsumerCore, ProducerCore
from rmqpy.client.errors import TransportError
from rmqpy.client.route import FaultTolerance, QueueSelector, TopicRoute
from rmqpy.protocol import message as M
from rmqpy.protocol.bodies.route import BrokerData, QueueData, TopicRouteData
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand

NS1, NS2 = "10.0.0.1:9876", "10.0.0.2:9876"
A, B = "10.0.1.1:10911", "10.0.1.2:10911"


def route_data(*brokers: tuple[str, dict[int, str], int, int]) -> TopicRouteData:
    return TopicRouteData([QueueData(name, n, n, perm) for name, _addrs, n, perm in brokers],
                          [BrokerData("C", name, addrs) for name, addrs, _n, _perm in brokers])


TWO_BROKERS = route_data(("broker-b", {0: B}, 2, 6), ("broker-a", {0: A}, 2, 6))


def ok_route(data: TopicRouteData) -> RemotingCommand:
    return RemotingCommand(code=ResponseCode.SUCCESS, body=data.encode(standard_json=False))


def send_ok(queue_id: int = 0, offset: int = 7, msg_id: str = "7F00000100002A9F0000000000000000") -> RemotingCommand:
    return RemotingCommand(code=0, ext_fields={"msgId": msg_id, "queueId": str(queue_id), "queueOffset": str(offset)})


class Net:
    """A scripted network: ``handler(call)`` answers or raises TransportError; calls are kept."""

    def __init__(self, handler: Callable[[Call], RemotingCommand | None]) -> None:
        self.handler = handler
        self.calls: list[Call] = []

    def invoke(self, call: Call) -> RemotingCommand | None:
        self.calls.append(call)
        return self.handler(call)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def producer(**kw: object) -> ProducerCore:
    args: dict = {"name_server": f"{NS1};{NS2}", "group": "PG", "send_timeout_ms": 3000, "retries": 2,
                  "credentials": None, "clock": Clock()}
    args.update(kw)
    return ProducerCore(**args)


def routes_then(broker: Callable[[Call], RemotingCommand | None],
                routes: dict[str, TopicRouteData] | None = None) -> Callable[[Call], RemotingCommand | None]:
    table = {"T": TWO_BROKERS} if routes is None else routes

    def handler(call: Call) -> RemotingCommand | None:
        if call.request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            data = table.get((call.request.ext_fields or {})["topic"])
            return ok_route(data) if data else RemotingCommand(code=ResponseCode.TOPIC_NOT_EXIST, remark="none")
        return broker(call)
    return handler


# ------------------------------------------------------------------------------------- routes
def test_publish_queues_are_sorted_by_broker_and_skip_brokers_without_master_or_write_perm() -> None:
    data = route_data(("b", {0: B}, 2, 6), ("a", {0: A}, 1, 6), ("c", {1: "x:1"}, 2, 6), ("d", {0: "y:1"}, 2, 4))
    route = TopicRoute("T", data)
    assert route.publish_queues() == [MessageQueue("T", "a", 0), MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)]
    # readable queues of every group, the slave-only one included
    assert [(q.broker_name, q.queue_id) for q in route.subscribe_queues()] == [
        ("a", 0), ("b", 0), ("b", 1), ("c", 0), ("c", 1), ("d", 0), ("d", 1)]
    assert route.subscribe_addr("c") == ("x:1", True) and route.subscribe_addr("a", 1) == (A, False)
    assert route.master("c") is None and route.subscribe_addr("zz") is None


def test_tbw102_route_gives_at_most_four_queues_per_broker() -> None:
    route = TopicRoute("New", route_data(("a", {0: A}, 8, 7)), from_default=True)
    assert route.publish_queues() == [MessageQueue("New", "a", i) for i in range(4)]


def test_selector_round_robin_skips_the_last_broker_and_faulty_ones() -> None:
    qs = TopicRoute("T", TWO_BROKERS).publish_queues()
    sel = QueueSelector(FaultTolerance(False))
    picks = [sel.select(qs, None, 0).broker_name for _ in range(4)]
    assert sorted(picks) == ["broker-a", "broker-a", "broker-b", "broker-b"]
    assert all(sel.select(qs, "broker-a", 0).broker_name == "broker-b" for _ in range(5))
    faults = FaultTolerance(True)
    faults.update("broker-b", 20, isolation=True, now=0)   # 10 s of isolation (5.3 tables)
    sel = QueueSelector(faults)
    assert {sel.select(qs, None, 5).broker_name for _ in range(4)} == {"broker-a"}
    assert {sel.select(qs, None, 10.5).broker_name for _ in range(4)} == {"broker-a", "broker-b"}
    assert faults.not_available_ms(600) == 2000 and faults.not_available_ms(49) == 0


# ------------------------------------------------------------------------------------- send
def test_send_request_has_the_java_header_and_properties() -> None:
    msg = Message("T", b"body", tags="TagA", keys=["k1", "k2"], properties={"color": "red"}, flag=3)
    body, props, sys_flag, uniq = producer()._prepare(msg)
    req = R.send_request("PG", MessageQueue("T", "broker-a", 3), body, props, sys_flag, msg.flag, born_ms=123)
    ext = req.ext_fields or {}
    assert req.code == RequestCode.SEND_MESSAGE_V2 and req.body == b"body"
    assert {k: ext[k] for k in "abcdefghjkmn"} == {
        "a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "123", "h": "3", "j": "0",
        "k": "false", "m": "false", "n": "broker-a"}
    assert M.string_to_properties(ext["i"]) == {"color": "red", "TAGS": "TagA", "KEYS": "k1 k2", "WAIT": "true",
                                                "UNIQ_KEY": uniq}
    assert len(uniq) == 32


def test_bodies_of_4k_and_more_are_zlib_compressed_with_the_5x_flag() -> None:
    small, flag = R.compress(b"x" * 4095)
    assert small == b"x" * 4095 and flag == 0
    packed, flag = R.compress(b"x" * 4096)
    assert zlib.decompress(packed) == b"x" * 4096 and flag == 0x301


def test_batch_is_one_request_with_each_message_encoded() -> None:
    core = producer()
    net = Net(routes_then(lambda call: send_ok(1, 10, "ID1,ID2")))
    result = run(net, core.batch_plan([Message("T", b"1", tags="x"), Message("T", b"2", keys="k")]))
    (send,) = [c for c in net.calls if c.request.code == RequestCode.SEND_BATCH_MESSAGE]
    assert (send.request.ext_fields or {})["m"] == "true"
    items = M.decode_batch_body(send.request.body or b"")
    props = [M.string_to_properties(i.properties_string) for i in items]
    assert [i.body for i in items] == [b"1", b"2"] and props[0]["TAGS"] == "x" and props[1]["KEYS"] == "k"
    assert result is not None and result.msg_id == ",".join(p["UNIQ_KEY"] for p in props)
    assert result.offset_msg_id == "ID1,ID2" and result.queue_offset == 10
    with pytest.raises(ClientError, match="same"):
        run(net, core.batch_plan([Message("T", b"1"), Message("U", b"2")]))


def test_send_retries_on_the_other_broker_with_the_same_message_id() -> None:
    def broker(call: Call) -> RemotingCommand:
        if call.addr == A:
            raise TransportError("connect refused")
        return send_ok(1)
    net = Net(routes_then(broker))
    core = producer()
    for _ in range(4):   # whichever broker the round robin starts with
        result = run(net, core.send_plan(Message("T", b"x")))
        assert result is not None and result.queue.broker_name == "broker-b" and result.status == SendStatus.SEND_OK
    sends = [c for c in net.calls if c.request.code == RequestCode.SEND_MESSAGE_V2]
    failed = [c for c in sends if c.addr == A]
    assert failed and len(sends) == 4 + len(failed)
    for bad in failed:   # the retry after a failure carries the same UNIQ_KEY
        nxt = sends[sends.index(bad) + 1]
        assert nxt.addr == B and nxt.request.ext_fields["i"] == bad.request.ext_fields["i"]


def test_send_gives_up_after_retries_and_does_not_retry_other_broker_errors() -> None:
    net = Net(routes_then(lambda call: RemotingCommand(code=ResponseCode.SYSTEM_BUSY, remark="busy")))
    with pytest.raises(ClientError) as err:
        run(net, producer(retries=2).send_plan(Message("T", b"x")))
    assert err.value.code == ResponseCode.SYSTEM_BUSY and "Send [3] times" in str(err.value)
    net = Net(routes_then(lambda call: RemotingCommand(code=ResponseCode.MESSAGE_ILLEGAL, remark="bad")))
    with pytest.raises(ClientError) as err:
        run(net, producer().send_plan(Message("T", b"x")))
    assert err.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert len([c for c in net.calls if c.request.code == RequestCode.SEND_MESSAGE_V2]) == 1


def test_send_stops_retrying_when_the_send_timeout_is_spent() -> None:
    clock = Clock()

    def slow(call: Call) -> RemotingCommand:
        clock.now += 2.0
        raise TransportError("timed out")
    net = Net(routes_then(slow))
    with pytest.raises(ClientError, match="timed out after 2 attempts"):
        run(net, producer(clock=clock).send_plan(Message("T", b"x")))
    sends = [c for c in net.calls if c.request.code == RequestCode.SEND_MESSAGE_V2]
    assert len(sends) == 2 and sends[1].timeout == pytest.approx(1.0)


def test_unknown_topic_is_sent_on_tbw102_route_and_unknown_everywhere_is_an_error() -> None:
    net = Net(routes_then(lambda call: send_ok(), {"TBW102": route_data(("a", {0: A}, 8, 7))}))
    result = run(net, producer().send_plan(Message("NewTopic", b"x")))
    assert result is not None and result.queue.topic == "NewTopic" and result.queue.broker_name == "a"
    with pytest.raises(ClientError, match="No route info of this topic: NewTopic"):
        run(Net(routes_then(lambda call: send_ok(), {})), producer().send_plan(Message("NewTopic", b"x")))


def test_name_servers_are_tried_in_turn_and_the_answering_one_is_kept() -> None:
    def handler(call: Call) -> RemotingCommand | None:
        if call.addr == NS1:
            raise TransportError("refused")
        return routes_then(lambda c: send_ok())(call)
    net = Net(handler)
    core = producer()
    run(net, core.send_plan(Message("T", b"x")))
    core.drop_route("T")
    core._publish.clear()
    run(net, core.send_plan(Message("T", b"x")))
    assert [c.addr for c in net.calls if c.request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC] == [NS1, NS2, NS2]
    with pytest.raises(TransportError, match="no name server answered"):
        run(Net(lambda call: (_ for _ in ()).throw(TransportError("down"))), producer().send_plan(Message("T", b"x")))


def test_routes_are_cached_for_30_seconds_and_kept_while_name_servers_are_down() -> None:
    clock = Clock()
    down = {"ns": False}

    def handler(call: Call) -> RemotingCommand | None:
        if call.request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC and down["ns"]:
            raise TransportError("down")
        return routes_then(lambda c: send_ok())(call)
    net = Net(handler)
    core = producer(clock=clock)
    for _ in range(3):
        run(net, core.send_plan(Message("T", b"x")))
    assert len([c for c in net.calls if c.request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC]) == 1
    clock.now += 31
    down["ns"] = True
    run(net, core.send_plan(Message("T", b"x")))   # the old route still works


def test_message_checks() -> None:
    core = producer()
    for bad, text in [(Message("T", b""), "length is zero"), (Message("a b", b"x"), "characters"),
                      (Message("T", b"x", properties={"TAGS": "x"}), "set by the client"),
                      (Message("T", b"x", tags="a\x01b"), "separate"), (Message("T" * 128, b"x"), "longer"),
                      (Message("T", b"x" * (4 * 1024 * 1024 + 1)), "over max")]:
        with pytest.raises(ClientError, match=text):
            run(Net(lambda call: None), core.send_plan(bad))
    with pytest.raises(ClientError, match="host:port"):
        producer(name_server="nohost")


def test_credentials_sign_every_request_as_acl_client_rpc_hook() -> None:
    net = Net(routes_then(lambda call: send_ok()))
    run(net, producer(credentials=("ak", "sk")).send_plan(Message("T", b"payload")))
    for call in net.calls:
        fields = call.request.ext_fields or {}
        assert fields["AccessKey"] == "ak"
        expected = signature.calculate(signature.content(fields, call.request.body), "sk")
        assert fields["Signature"] == expected
    with pytest.raises(ClientError, match="credentials"):
        producer(credentials=("ak", ""))


# ------------------------------------------------------------------------------------- consume
def consumer(clock: Clock | None = None) -> ConsumerCore:
    return ConsumerCore(NS1, "CG", None, clock or Clock())


def pull_body(*msgs: tuple[bytes, dict[str, str], int]) -> bytes:
    out = b""
    for i, (body, props, sys_flag) in enumerate(msgs):
        inner = M.MessageExtBrokerInner(topic="T", queue_id=0, body=body, properties=props, sys_flag=sys_flag,
                                        born_host=("1.2.3.4", 5), store_host=("1.2.3.4", 6))
        out += M.encode_record(inner, queue_offset=i, physical_offset=len(out))
    return out


def test_pull_request_and_status_mapping() -> None:
    mq = MessageQueue("T", "broker-a", 1)
    sub = R.subscription("T", "a || b")
    req = R.pull_request("CG", mq, 5, 32, sub)
    assert req.ext_fields == {"consumerGroup": "CG", "topic": "T", "queueId": "1", "queueOffset": "5",
                              "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
                              "subscription": "a || b", "subVersion": "0", "expressionType": "TAG",
                              "bname": "broker-a"}
    assert R.pull_request("CG", mq, 5, 32, sub, suspend_ms=15000).ext_fields["sysFlag"] == "6"   # + suspend
    base = {"suggestWhichBrokerId": "0", "nextBeginOffset": "9", "minOffset": "0", "maxOffset": "9"}
    for code, status in [(19, PullStatus.NO_NEW_MSG), (20, PullStatus.NO_MATCHED_MSG), (21, PullStatus.OFFSET_ILLEGAL)]:
        result, _ = R.parse_pull_response(RemotingCommand(code=code, ext_fields=base), mq, sub)
        assert result.status is status and result.next_begin_offset == 9 and result.messages == []
    with pytest.raises(ClientError) as err:
        R.parse_pull_response(RemotingCommand(code=ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, remark="no"), mq, sub)
    assert err.value.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


def test_pull_filters_tags_exactly_inflates_bodies_and_marks_offsets() -> None:
    mq = MessageQueue("T", "broker-a", 0)
    big = bytes(range(256)) * 40
    body = pull_body((b"one", {"TAGS": "a"}, 0), (b"two", {"TAGS": "c"}, 0),
                     (zlib.compress(big), {"TAGS": "b"}, 0x301), (b"four", {}, 0))
    ext = {"suggestWhichBrokerId": "1", "nextBeginOffset": "4", "minOffset": "0", "maxOffset": "4"}
    result, suggested = R.parse_pull_response(RemotingCommand(code=0, ext_fields=ext, body=body), mq,
                                              R.subscription("T", "a||b"))
    assert suggested == 1 and result.status is PullStatus.FOUND
    assert [m.body for m in result.messages] == [b"one", big]
    assert result.messages[1].sys_flag & 0x301 == 0
    assert result.messages[0].properties["MIN_OFFSET"] == "0" and result.messages[0].properties["MAX_OFFSET"] == "4"
    everything, _ = R.parse_pull_response(RemotingCommand(code=0, ext_fields=ext, body=body), mq,
                                          R.subscription("T", "*"))
    assert len(everything.messages) == 4
    with pytest.raises(ClientError, match="undecodable"):
        R.parse_pull_response(RemotingCommand(code=0, ext_fields=ext, body=body[:-3]), mq, R.subscription("T", "*"))


def test_consumer_heartbeats_once_then_pulls_commits_and_queries() -> None:
    def broker(call: Call) -> RemotingCommand:
        code = call.request.code
        if code == RequestCode.QUERY_CONSUMER_OFFSET:
            assert (call.request.ext_fields or {})["setZeroIfNotFound"] == "false"
            return RemotingCommand(code=ResponseCode.QUERY_NOT_FOUND, remark="none")
        if code == RequestCode.PULL_MESSAGE:
            return RemotingCommand(code=19, ext_fields={"suggestWhichBrokerId": "0", "nextBeginOffset": "0",
                                                        "minOffset": "0", "maxOffset": "0"})
        if code == RequestCode.GET_MAX_OFFSET:
            return RemotingCommand(code=0, ext_fields={"offset": "42"})
        return RemotingCommand(code=0)
    net = Net(routes_then(broker))
    core = consumer()
    mq = MessageQueue("T", "broker-a", 1)
    assert run(net, core.fetch_queues_plan("T")) == [MessageQueue("T", "broker-a", 0), mq,
                                                      MessageQueue("T", "broker-b", 0), MessageQueue("T", "broker-b", 1)]
    assert run(net, core.query_offset_plan(mq)) == -1
    assert run(net, core.pull_plan(mq, 0, 32, "*", 10000)).status is PullStatus.NO_NEW_MSG
    run(net, core.commit_offset_plan(mq, 5))
    assert run(net, core.max_offset_plan(mq)) == 42
    codes = [c.request.code for c in net.calls if c.addr == A]
    assert codes == [RequestCode.HEART_BEAT, RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.PULL_MESSAGE,
                     RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.GET_MAX_OFFSET]
    run(net, core.shutdown_plan())
    assert net.calls[-1].request.code == RequestCode.UNREGISTER_CLIENT
    with pytest.raises(ClientError, match="offset < 0"):
        run(net, core.pull_plan(mq, -1, 32, "*", 1000))
