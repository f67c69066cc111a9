"""Custom headers of the name server request codes (``protocol/header/namesrv``)."""
from __future__ import annotations

from rmqpy.protocol.headers.base import CommandHeader, Long, header, optional, required


@header
class GetRouteInfoRequestHeader(CommandHeader):
    topic: str = required()
    acceptStandardJsonOnly: bool | None = optional()


@header
class RegisterBrokerRequestHeader(CommandHeader):
    brokerName: str = required()
    brokerAddr: str = required()
    clusterName: str = required()
    haServerAddr: str = required()
    brokerId: Long = required()
    heartbeatTimeoutMillis: Long | None = optional()
    enableActingMaster: bool | None = optional()
    compressed: bool = optional(False)
    bodyCrc32: int = optional(0)


@header
class RegisterBrokerResponseHeader(CommandHeader):
    haServerAddr: str | None = optional()
    masterAddr: str | None = optional()


@header
class UnRegisterBrokerRequestHeader(CommandHeader):
    brokerName: str = required()
    brokerAddr: str = required()
    clusterName: str = required()
    brokerId: Long = required()


@header
class QueryDataVersionRequestHeader(CommandHeader):
    brokerName: str = required()
    brokerAddr: str = required()
    clusterName: str = required()
    brokerId: Long = required()


@header
class QueryDataVersionResponseHeader(CommandHeader):
    changed: bool = required()


@header
class BrokerHeartbeatRequestHeader(CommandHeader):
    clusterName: str = required()
    brokerAddr: str = required()
    brokerName: str = required()
    brokerId: Long | None = optional()
    epoch: int | None = optional()
    maxOffset: Long | None = optional()
    confirmOffset: Long | None = optional()
    heartbeatTimeoutMills: Long | None = optional()
    electionPriority: int | None = optional()


@header
class PutKVConfigRequestHeader(CommandHeader):
    namespace: str = required()
    key: str = required()
    value: str = required()


@header
class GetKVConfigRequestHeader(CommandHeader):
    namespace: str = required()
    key: str = required()


@header
class GetKVConfigResponseHeader(CommandHeader):
    value: str | None = optional()


@header
class DeleteKVConfigRequestHeader(CommandHeader):
    namespace: str = required()
    key: str = required()


@header
class GetKVListByNamespaceRequestHeader(CommandHeader):
    namespace: str = required()


@header
class GetTopicsByClusterRequestHeader(CommandHeader):
    cluster: str = required()


@header
class DeleteTopicFromNamesrvRequestHeader(CommandHeader):
    topic: str = required()
    clusterName: str | None = optional()


@header
class RegisterTopicRequestHeader(CommandHeader):
    topic: str = required()


@header
class WipeWritePermOfBrokerRequestHeader(CommandHeader):
    brokerName: str = required()


@header
class WipeWritePermOfBrokerResponseHeader(CommandHeader):
    wipeTopicCount: int = required()


@header
class AddWritePermOfBrokerRequestHeader(CommandHeader):
    brokerName: str = required()


@header
class AddWritePermOfBrokerResponseHeader(CommandHeader):
    addTopicCount: int = required()
