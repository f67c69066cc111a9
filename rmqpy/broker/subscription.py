"""SubscriptionGroupManager: consumer group configs (config/subscriptionGroup.json)."""
from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime

from rmqpy.broker.configfile import ConfigManager
from rmqpy.broker.validation import is_group_auto_creatable
from rmqpy.protocol.bodies.broker import SubscriptionGroupConfig
from rmqpy.protocol.bodies.topic import DataVersion
from rmqpy.remoting.ratelimit import RateLimitedLogger

TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
FILTERSRV_CONSUMER_GROUP = "FILTERSRV_CONSUMER"
SELF_TEST_CONSUMER_GROUP = "SELF_TEST_C_GROUP"
CID_RMQ_SYS_PREFIX = "CID_RMQ_SYS_"
CID_ONSAPI_PERMISSION_GROUP = "CID_ONSAPI_PERMISSION"
CID_ONSAPI_OWNER_GROUP = "CID_ONSAPI_OWNER"
CID_ONSAPI_PULL_GROUP = "CID_ONSAPI_PULL"
ONS_HTTP_PROXY_GROUP = "CID_ONS-HTTP-PROXY"
CID_SYS_RMQ_TRANS = "CID_RMQ_SYS_TRANS"


def is_sys_consumer_group(group: str) -> bool:
    return group.startswith(CID_RMQ_SYS_PREFIX)


class SubscriptionGroupManager(ConfigManager):
    file_name = "subscriptionGroup.json"
    log = RateLimitedLogger()  # lines any client can trigger: rate-limited per call site, values clipped

    def __init__(self, broker_config: Any, config_dir: str | None, clock: IReactorTime | None = None) -> None:
        self.log = self.log.on(clock)
        super().__init__(config_dir)
        self.broker_config = broker_config
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = DataVersion()
        self.extra: dict[str, Any] = {}
        for group in (TOOLS_CONSUMER_GROUP, FILTERSRV_CONSUMER_GROUP, SELF_TEST_CONSUMER_GROUP,
                      ONS_HTTP_PROXY_GROUP, CID_ONSAPI_PULL_GROUP, CID_ONSAPI_PERMISSION_GROUP,
                      CID_ONSAPI_OWNER_GROUP, CID_SYS_RMQ_TRANS):
            self.table[group] = SubscriptionGroupConfig(group)
        self.table[CID_SYS_RMQ_TRANS].consumeBroadcastEnable = True

    def encode(self) -> Any:
        out = dict(self.extra)
        out["dataVersion"] = self.data_version
        out["subscriptionGroupTable"] = dict(self.table)
        return out

    def snapshot(self) -> Any:
        out = dict(self.extra)
        out["dataVersion"] = self.data_version.to_json()
        out["subscriptionGroupTable"] = {name: cfg.to_json() for name, cfg in self.table.items()}
        return out

    def decode(self, obj: Any) -> None:
        for name, cfg in (obj.get("subscriptionGroupTable") or {}).items():
            self.table[str(name)] = SubscriptionGroupConfig.from_json(cfg)
        self.data_version = DataVersion.from_json(obj.get("dataVersion"))
        self.extra = {k: v for k, v in obj.items() if k not in ("subscriptionGroupTable", "dataVersion")}

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """``findSubscriptionGroupConfig``: auto-creates when allowed and, as 5.3.3 does, only
        a name of at most 255 characters of ``[%|a-zA-Z0-9_-]``. rmqpy also finds no such name
        kept in subscriptionGroup.json from before (its %RETRY%/%DLQ% topics are directories):
        None, code 26 for the caller."""
        if not is_group_auto_creatable(group):
            return None
        cfg = self.table.get(group)
        if cfg is None and (self.broker_config.autoCreateSubscriptionGroup or is_sys_consumer_group(group)):
            cfg = SubscriptionGroupConfig(group)
            self.table[group] = cfg
            self.log.info("auto create a subscription group, {group}", group=group)
            self.data_version.next_version()
            self.save()
        return cfg

    def update(self, cfg: SubscriptionGroupConfig) -> defer.Deferred:
        """Replace or add; the Deferred fires once the file has it."""
        self.table[cfg.groupName] = cfg
        self.data_version.next_version()
        return self.save()

    def delete(self, group: str) -> defer.Deferred | None:
        """None if there was no such group, else :meth:`save`'s Deferred."""
        if self.table.pop(group, None) is None:
            return None
        self.data_version.next_version()
        return self.save()
