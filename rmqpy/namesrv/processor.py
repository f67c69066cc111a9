"""DefaultRequestProcessor of the name server: one handler per request code."""
from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Callable, Union

from twisted.internet import defer

from rmqpy.common import config_guard
from rmqpy.common.properties import PropertiesError
from rmqpy.namesrv.kvconfig import KVLimitError
from rmqpy.namesrv.routeinfo import TOPIC_SYS_FLAG_UNIT, TOPIC_SYS_FLAG_UNIT_SUB
from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.route import QueueData, TopicRouteData, kv_table
from rmqpy.protocol.bodies.topic import DataVersion, RegisterBrokerBody, TopicConfigSerializeWrapper
from rmqpy.protocol.codes import MQVersion, RequestCode, ResponseCode
from rmqpy.protocol.command import RPC_RESPONSE, RemotingCommand
from rmqpy.protocol.headers import namesrv as h
from rmqpy.remoting.ratelimit import RateLimitedLogger

if TYPE_CHECKING:
    from rmqpy.namesrv.api import Namesrv
    from rmqpy.remoting.protocol import RemotingProtocol

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
FAQ_TIP = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
_V4_9_4 = int(MQVersion.V4_9_4)  # from here on clients read standard JSON (quoted broker ids)

#: a reply, or (KV puts and deletes: after the file is written) a Deferred of one
Reply = Union[RemotingCommand, "defer.Deferred[RemotingCommand]"]
Handler = Callable[["RemotingProtocol", RemotingCommand], Reply]


def crc32_masked(data: bytes) -> int:
    """``UtilAll.crc32``: CRC32 masked to 31 bits."""
    return zlib.crc32(data) & 0x7FFFFFFF


class NamesrvRequestProcessor:
    log = RateLimitedLogger()  # lines any client can trigger: rate-limited per call site, values clipped

    def __init__(self, controller: "Namesrv") -> None:
        self.log = self.log.on(controller.clock)
        self.controller = controller
        self.routes = controller.routes
        self.kv = controller.kv
        # encoded route bodies by (topic, standard JSON), valid while routes.generation holds
        self._route_cache: dict[tuple[str, bool], tuple[int, str | None, bytes]] = {}
        R = RequestCode
        self.handlers: dict[int, Handler] = {
            R.PUT_KV_CONFIG: self.put_kv_config,
            R.GET_KV_CONFIG: self.get_kv_config,
            R.DELETE_KV_CONFIG: self.delete_kv_config,
            R.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
            R.QUERY_DATA_VERSION: self.query_data_version,
            R.REGISTER_BROKER: self.register_broker,
            R.UNREGISTER_BROKER: self.unregister_broker,
            R.BROKER_HEARTBEAT: self.broker_heartbeat,
            R.GET_ROUTEINFO_BY_TOPIC: self.get_route_info,
            R.GET_BROKER_CLUSTER_INFO: self.get_cluster_info,
            R.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            R.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
            R.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topics,
            R.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            R.REGISTER_TOPIC_IN_NAMESRV: self.register_topic,
            R.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            R.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.get_system_topics,
            R.GET_UNIT_TOPIC_LIST: self.get_unit_topics,
            R.GET_HAS_UNIT_SUB_TOPIC_LIST: self.get_has_unit_sub_topics,
            R.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self.get_has_unit_sub_ununit_topics,
            R.UPDATE_NAMESRV_CONFIG: self.update_config,
            R.GET_NAMESRV_CONFIG: self.get_config,
        }

    def route_stamp(self) -> tuple[int, int, bool]:
        """What GET_ROUTEINFO_BY_TOPIC's answers depend on besides the request: the route tables,
        the KV config (ORDER_TOPIC_CONFIG) and orderMessageEnable. The dispatcher replays a kept
        answer while this is unchanged (:mod:`rmqpy.remoting.replay`)."""
        return self.routes.generation, self.kv.version, self.controller.config.orderMessageEnable

    def process_request(self, channel: "RemotingProtocol", request: RemotingCommand) -> Reply:
        return self.handlers[request.code](channel, request)

    # ------------------------------------------------------------------ KV config
    def put_kv_config(self, channel: "RemotingProtocol", request: RemotingCommand) -> Reply:
        hdr = request.decode_header(h.PutKVConfigRequestHeader)
        try:
            written = self.kv.put(hdr.namespace, hdr.key, hdr.value)
        except KVLimitError as exc:  # rmqpy's bounds (Java has none): the kvConfigMax* keys
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc))
        return written.addCallbacks(lambda _: request.response(), lambda f: request.response(
            ResponseCode.SYSTEM_ERROR, f"persist kvConfig failed: {f.getErrorMessage()}"))

    def get_kv_config(self, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(h.GetKVConfigRequestHeader)
        value = self.kv.get(hdr.namespace, hdr.key)
        if value is None:
            return request.response(ResponseCode.QUERY_NOT_FOUND,
                                    f"No config item, Namespace: {hdr.namespace} Key: {hdr.key}")
        return request.response(header=h.GetKVConfigResponseHeader(value=value))

    def delete_kv_config(self, channel: "RemotingProtocol", request: RemotingCommand) -> Reply:
        hdr = request.decode_header(h.DeleteKVConfigRequestHeader)
        return self.kv.delete(hdr.namespace, hdr.key).addCallbacks(lambda _: request.response(), lambda f: request.response(
            ResponseCode.SYSTEM_ERROR, f"persist kvConfig failed: {f.getErrorMessage()}"))

    def get_kv_list_by_namespace(self, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(h.GetKVListByNamespaceRequestHeader)
        table = self.kv.list_namespace(hdr.namespace)
        if table is None:
            return request.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {hdr.namespace}")
        return request.response(body=kv_table(table))

    # ------------------------------------------------------------------ brokers
    def register_broker(self, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(h.RegisterBrokerRequestHeader)
        body = request.body or b""
        if hdr.bodyCrc32 and crc32_masked(body) != hdr.bodyCrc32:
            self.log.warn("receive registerBroker request, crc32 not match from {peer}", peer=channel.remote_address)
            return request.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        wrapper: TopicConfigSerializeWrapper | None = None
        filters: list[str] = []
        if body:
            try:
                if request.version >= MQVersion.V3_0_11:
                    reg = RegisterBrokerBody.decode(body, bool(hdr.compressed), request.version)
                    wrapper, filters = reg.topicConfigSerializeWrapper, reg.filterServerList
                else:
                    wrapper = TopicConfigSerializeWrapper.from_json(fastjson.loads(body))
            except (ValueError, KeyError, TypeError, zlib.error) as exc:
                return request.response(ResponseCode.SYSTEM_ERROR, f"bad register broker body: {exc}")
        else:
            wrapper = TopicConfigSerializeWrapper(dataVersion=DataVersion(0, 0))
        result = self.routes.register_broker(hdr.clusterName, hdr.brokerAddr, hdr.brokerName, hdr.brokerId,
                                             hdr.haServerAddr, wrapper, filters, channel,
                                             hdr.heartbeatTimeoutMillis)
        out_body = None
        if self.controller.config.returnOrderTopicConfigToBroker:
            table = self.kv.list_namespace(NAMESPACE_ORDER_TOPIC_CONFIG)
            out_body = kv_table(table) if table is not None else None
        return request.response(header=h.RegisterBrokerResponseHeader(haServerAddr=result.ha_server_addr,
                                                                      masterAddr=result.master_addr),
                                body=out_body)

    def unregister_broker(self, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(h.UnRegisterBrokerRequestHeader)
        self.routes.unregister_broker(hdr.clusterName, hdr.brokerAddr, hdr.brokerName, hdr.brokerId)
        return request.response()

    def broker_heartbeat(self, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(h.BrokerHeartbeatRequestHeader)
        self.routes.touch(hdr.brokerAddr)
        return request.response()

    def query_data_version(self, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(h.QueryDataVersionRequestHeader)
        version = DataVersion.from_json(fastjson.loads(request.body)) if request.body else DataVersion(0, 0)
        changed = self.routes.is_topic_config_changed(hdr.brokerAddr, version)
        if not changed:
            self.routes.touch(hdr.brokerAddr)
        ours = self.routes.data_version_of(hdr.brokerAddr)
        return request.response(header=h.QueryDataVersionResponseHeader(changed=changed),
                                body=fastjson.dumps(ours).encode() if ours is not None else None)

    # ------------------------------------------------------------------ routes and topics
    def get_route_info(self, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand:
        # GetRouteInfoRequestHeader read straight from extFields (what decode_header does for
        # its two fields); decode_header only to raise its HeaderError when topic is missing
        ext = request.ext_fields
        topic = ext.get("topic") if ext else None
        if topic is None:
            topic = request.decode_header(h.GetRouteInfoRequestHeader).topic
        if request.version >= _V4_9_4:
            standard = True
        else:
            assert ext is not None  # it holds the topic
            accept = ext.get("acceptStandardJsonOnly")
            standard = accept is not None and accept.strip().lower() == "true"
        order_conf = (self.kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
                      if self.controller.config.orderMessageEnable else None)
        key = (topic, standard)
        cached = self._route_cache.get(key)
        if cached is not None and cached[0] == self.routes.generation and cached[1] == order_conf:
            # request.response(body=...) without its header and ext_fields work
            return RemotingCommand(0, opaque=request.opaque, flag=RPC_RESPONSE, body=cached[2],
                                   serialize_type=request.serialize_type)
        route = self.routes.route_of(topic)
        if route is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST,
                                    f"No topic route info in name server for the topic: {topic}{FAQ_TIP}")
        route.orderTopicConf = order_conf
        body = route.encode(standard_json=standard)
        if len(self._route_cache) > 100_000:
            self._route_cache.clear()
        self._route_cache[key] = (self.routes.generation, order_conf, body)
        return request.response(body=body)

    def get_cluster_info(self, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand:
        return request.response(body=fastjson.dumps(self.routes.cluster_info()).encode())

    def wipe_write_perm(self, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(h.WipeWritePermOfBrokerRequestHeader)
        count = self.routes.change_write_perm(hdr.brokerName, wipe=True)
        self.log.info("wipe write perm of broker {name}, count {count}", name=hdr.brokerName, count=count)
        return request.response(header=h.WipeWritePermOfBrokerResponseHeader(wipeTopicCount=count))

    def add_write_perm(self, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(h.AddWritePermOfBrokerRequestHeader)
        count = self.routes.change_write_perm(hdr.brokerName, wipe=False)
        return request.response(header=h.AddWritePermOfBrokerResponseHeader(addTopicCount=count))

    def get_all_topics(self, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand:
        return request.response(body=self.routes.all_topics().encode())

    def delete_topic(self, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(h.DeleteTopicFromNamesrvRequestHeader)
        self.routes.delete_topic(hdr.topic, hdr.clusterName)
        return request.response()

    def register_topic(self, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(h.RegisterTopicRequestHeader)
        if request.body:
            route = TopicRouteData.from_json(fastjson.loads(request.body))
            self.routes.register_topic(hdr.topic, [QueueData(**vars(q)) for q in route.queueDatas])
        return request.response()

    def get_topics_by_cluster(self, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(h.GetTopicsByClusterRequestHeader)
        return request.response(body=self.routes.topics_by_cluster(hdr.cluster).encode())

    def get_system_topics(self, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand:
        return request.response(body=self.routes.system_topics().encode())

    def get_unit_topics(self, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand:
        return request.response(body=self.routes.topics_with_flag(
            lambda f: bool(f & TOPIC_SYS_FLAG_UNIT)).encode())

    def get_has_unit_sub_topics(self, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand:
        return request.response(body=self.routes.topics_with_flag(
            lambda f: bool(f & TOPIC_SYS_FLAG_UNIT_SUB)).encode())

    def get_has_unit_sub_ununit_topics(self, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand:
        return request.response(body=self.routes.topics_with_flag(
            lambda f: not f & TOPIC_SYS_FLAG_UNIT and bool(f & TOPIC_SYS_FLAG_UNIT_SUB)).encode())

    # ------------------------------------------------------------------ config
    def update_config(self, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand:
        if request.body:
            try:
                props = config_guard.parse_update_body(request.body)
            except PropertiesError as exc:
                return request.response(ResponseCode.SYSTEM_ERROR, f"string2Properties error: {exc}")
            config = self.controller.config
            refused = config_guard.refusal(
                props, config_guard.NAMESRV_BLACK_LIST + tuple(config.configBlackList.split(";")),
                config.remoteConfigUpdateAllowKeys)
            if refused is not None:   # issue 11: NO_PERMISSION as Java's black list check, one log line
                self.log.warn("updateConfig from {a} refused: {r}", a=channel.remote_address,
                              r=refused)
                return request.response(ResponseCode.NO_PERMISSION, refused)
            try:
                self.controller.update_config(props)
            except PropertiesError as exc:   # a value of the wrong type: nothing was set
                return request.response(ResponseCode.SYSTEM_ERROR, f"string2Properties error: {exc}")
        return request.response()

    def get_config(self, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand:
        text = self.controller.all_configs_text()
        return request.response(body=text.encode("utf-8") if text else None)
