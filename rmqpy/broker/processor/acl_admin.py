"""The plain ACL codes of mqadmin (4.9): updateAclConfig, deleteAclConfig, updateGlobalWhiteAddr,
clusterAclConfigVersion, getAclConfig (Java's AdminBrokerProcessor handles them there).

Each change is checked as a whole new rule set before the file is written (atomically, with
its ``dataVersion`` moved on, as Java's ``AclUtils.writeDataObject`` YAML a Java broker reads),
and takes effect at once. Failures answer Java's codes: 209 UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
210 DELETE_ACL_CONFIG_FAILED, 211 UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED. On a broker without
``aclEnable`` they answer SYSTEM_ERROR (Java fails with a NullPointerException there). Only
admin accounts reach these codes (:mod:`rmqpy.acl.validator`); the request's file path of
updateGlobalWhiteAddr must name an ACL file in use.
"""
from __future__ import annotations

from typing import Any, Callable

from twisted.logger import Logger

from rmqpy.acl.manager import PlainPermissionManager
from rmqpy.acl.permission import AclError
from rmqpy.protocol import fastjson
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand

UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209
DELETE_ACL_CONFIG_FAILED = 210
UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211
MAX_LIST_ITEMS = 10000


def _split(value: str | None) -> list[str] | None:
    """``UtilAll.split(value, ",")``: None stays None, as Java's String.split (trailing empties dropped)."""
    if value is None:
        return None
    items = value.split(",")
    while items and items[-1] == "":
        items.pop()
    if len(items) > MAX_LIST_ITEMS:
        raise AclError(f"more than {MAX_LIST_ITEMS} items")
    return items


def _version(v: dict[str, int]) -> dict[str, int]:
    return {"counter": v["counter"], "stateVersion": 0, "timestamp": v["timestamp"]}


class AclAdminProcessor:
    codes = (RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, RequestCode.DELETE_ACL_CONFIG,
             RequestCode.GET_BROKER_CLUSTER_ACL_INFO, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
             RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
    log = Logger(namespace="rmqpy.acl")

    def __init__(self, acl: Callable[[], PlainPermissionManager | None], now_ms: Callable[[], int],
                 identity: Callable[[], tuple[str, str, str]]) -> None:
        self.acl = acl
        self.now_ms = now_ms
        self.identity = identity  # (brokerName, brokerAddr, clusterName)

    def process_request(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        acl = self.acl()
        if acl is None:
            return request.response(ResponseCode.SYSTEM_ERROR, "The broker does not enable acl (aclEnable=false)")
        ext = request.ext_fields or {}
        code = request.code
        peer = channel.remote_address
        if code == RequestCode.UPDATE_AND_CREATE_ACL_CONFIG:
            return self._change(request, UPDATE_AND_CREATE_ACL_CONFIG_FAILED, lambda: self._update(acl, ext),
                                f"The accesskey[{ext.get('accessKey')}] corresponding to accessConfig has been "
                                "updated failed.", peer)
        if code == RequestCode.DELETE_ACL_CONFIG:
            ak = ext.get("accessKey")
            return self._change(request, DELETE_ACL_CONFIG_FAILED,
                                lambda: bool(ak) and acl.delete_access_config(str(ak), self.now_ms()),
                                f"The accesskey[{ak}] corresponding to accessConfig has been deleted failed.", peer)
        if code == RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG:
            addrs = ext.get("globalWhiteAddrs")
            return self._change(
                request, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
                lambda: addrs is not None and acl.update_global_white_addrs(
                    _split(addrs) or [], ext.get("aclFileFullPath"), self.now_ms()),
                f"The globalWhiteAddresses[{addrs}] has been updated failed.", peer)
        name, addr, cluster = self.identity()
        if code == RequestCode.GET_BROKER_CLUSTER_ACL_INFO:
            default, per_file = acl.versions()
            return request.response(ResponseCode.SUCCESS, ext_fields={
                "version": fastjson.dumps(_version(default)),
                "allAclFileVersion": fastjson.dumps({p: _version(v) for p, v in per_file.items()}),
                "brokerName": name, "brokerAddr": addr, "clusterName": cluster})
        white, accounts = acl.all_acl_config()
        body = {"globalWhiteAddrs": white, "plainAccessConfigs": accounts}
        return request.response(ResponseCode.SUCCESS, body=fastjson.dumps(body).encode("utf-8"))

    def _update(self, acl: PlainPermissionManager, ext: dict[str, str]) -> bool:
        acl.update_access_config({
            "accessKey": ext.get("accessKey"), "secretKey": ext.get("secretKey"),
            "whiteRemoteAddress": ext.get("whiteRemoteAddress"),
            "admin": str(ext.get("admin", "false")).lower() == "true",
            "defaultTopicPerm": ext.get("defaultTopicPerm"), "defaultGroupPerm": ext.get("defaultGroupPerm"),
            "topicPerms": _split(ext.get("topicPerms")), "groupPerms": _split(ext.get("groupPerms"))},
            self.now_ms())
        return True

    def _change(self, request: RemotingCommand, failed: int, change: Callable[[], bool], message: str,
                peer: str) -> RemotingCommand:
        try:
            ok = change()
        except (AclError, OSError) as exc:
            self.log.warn("ACL change {code} from {peer} refused: {err}", code=request.code, peer=peer, err=exc)
            return request.response(failed, str(exc))
        if not ok:
            return request.response(failed, message)
        self.log.info("ACL change {code} from {peer} written", code=request.code, peer=peer)
        return request.response(ResponseCode.SUCCESS)
