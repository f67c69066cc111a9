"""AdminBrokerProcessor, one family of its requests: the broker configuration."""
from __future__ import annotations

from rmqpy.broker.processor.admin_base import CONFIG_BLACK_LIST, AdminBase
from rmqpy.common import config_guard
from rmqpy.common.properties import PropertiesError, apply_properties
from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.topic import DataVersion
from rmqpy.protocol.codes import ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.admin import GetBrokerConfigResponseHeader
from rmqpy.remoting.channel import Channel

#: what the controller sets on a broker in controller mode, never an admin
CONTROLLER_OWNED_KEYS = frozenset({"brokerRole", "brokerId"})


class ConfigAdmin(AdminBase):
    config_version: DataVersion  # the broker config's version, made by AdminBrokerProcessor.__init__

    def get_broker_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """rmqpy's settings, then every other key the Java broker of the requester's generation lists,
        with Java's default (rmqpy/broker/java_config.py)."""
        from rmqpy.broker.config import SECRET_KEYS
        from rmqpy.broker.java_config import java_only_items
        from rmqpy.common.properties import format_properties
        settings = self.broker.settings
        items = [(k, "******" if k in SECRET_KEYS and v else v) for k, v in settings.items()]
        content = format_properties(items + java_only_items(request.version, {k for k, _ in items}))
        version = fastjson.dumps(self.config_version)
        return self._ok(request, content.encode() if content else None,
                        header=GetBrokerConfigResponseHeader(version=version))

    def update_broker_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        self.log.info("updateBrokerConfig called by {a}", a=channel.remote_address)
        if request.body:
            try:
                props = config_guard.parse_update_body(request.body)
            except PropertiesError as exc:
                return request.response(ResponseCode.SYSTEM_ERROR, f"string2Properties error: {exc}")
            broker_config = self.broker.settings.broker
            refused = config_guard.refusal(props, CONFIG_BLACK_LIST + tuple(broker_config.configBlackList.split(";")),
                                           broker_config.remoteConfigUpdateAllowKeys)
            if refused is not None:   # issue 11: NO_PERMISSION as Java's black list check, one log line
                self.log.warn("updateBrokerConfig from {a} refused: {r}",
                              a=channel.remote_address, r=refused)
                return request.response(ResponseCode.NO_PERMISSION, refused)
            owned = sorted(CONTROLLER_OWNED_KEYS & props.keys()) if broker_config.enableControllerMode else []
            if owned:  # Java would set the field behind its ReplicasManager's back; the controller decides
                refused = (f"{', '.join(owned)} cannot be updated in controller mode (enableControllerMode=true): "
                           f"the controller decides the role and the id")
                self.log.warn("updateBrokerConfig from {a} refused: {r}", a=channel.remote_address, r=refused)
                return request.response(ResponseCode.NO_PERMISSION, refused)
            from rmqpy.broker.config import check_update
            try:
                check_update(self.broker.settings, props)   # what a restart would refuse, too
                before = self.broker.role
                apply_properties(self.broker.settings.objects, props)
            except PropertiesError as exc:   # a value of the wrong type: nothing was set
                return request.response(ResponseCode.SYSTEM_ERROR, f"string2Properties error: {exc}")
            if "brokerRole" in props:
                # Java only sets the field (its services stay as they were); here the role's services
                # follow it through the switch a failover uses (docs/compatibility.md)
                after = self.broker.role
                self.broker.hold_role(before)
                self.broker.switch_role(after.role, after.broker_id if after.role.is_slave else None)
            self.config_version.next_version()
            # Java's Configuration.update persists to the broker config file (the -c file)
            from rmqpy.broker.config import persist_settings
            try:
                path = persist_settings(self.broker.settings)
                self.log.info("updateBrokerConfig persisted to {p}", p=path)
            except OSError as exc:
                self.log.error("persist string2File error, {e}", e=exc)
            if "brokerPermission" in props:
                self.broker.topic_config_manager.data_version.next_version()
                if self.broker.started:
                    self.broker.register_broker_all()
        return self._ok(request)
