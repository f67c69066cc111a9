"""Custom headers of 5.x controller mode (Java ``protocol/header/controller``, ``.../register`` and
``NotifyBrokerRoleChangedRequestHeader``), as a broker sends and reads them.

``BROKER_HEARTBEAT``'s header is the name server's (``headers/namesrv.py``
``BrokerHeartbeatRequestHeader``): the controller reads the same class. The fields Java fills with
``System.currentTimeMillis()`` at construction (``invokeTime``) are sent as Java sends them; the
controller does not read them. No field differs in 5.5.1 (its sources jar, compared class by class).
"""
from __future__ import annotations

from rmqpy.protocol.headers.base import CommandHeader, Long, header, optional, required


@header
class GetMetaDataResponseHeader(CommandHeader):
    """CONTROLLER_GET_METADATA_INFO's answer (the request has no header)."""
    group: str | None = optional()
    controllerLeaderId: str | None = optional()
    controllerLeaderAddress: str | None = optional()
    isLeader: bool = optional(False)
    peers: str | None = optional()


@header
class GetNextBrokerIdRequestHeader(CommandHeader):
    clusterName: str | None = optional()
    brokerName: str | None = optional()


@header
class GetNextBrokerIdResponseHeader(CommandHeader):
    clusterName: str | None = optional()
    brokerName: str | None = optional()
    nextBrokerId: Long | None = optional()


@header
class ApplyBrokerIdRequestHeader(CommandHeader):
    clusterName: str | None = optional()
    brokerName: str | None = optional()
    appliedBrokerId: Long | None = optional()
    registerCheckCode: str | None = optional()


@header
class ApplyBrokerIdResponseHeader(CommandHeader):
    clusterName: str | None = optional()
    brokerName: str | None = optional()


@header
class RegisterBrokerToControllerRequestHeader(CommandHeader):
    clusterName: str | None = optional()
    brokerName: str | None = optional()
    brokerId: Long | None = optional()
    brokerAddress: str | None = optional()
    invokeTime: Long = optional(0)


@header
class RegisterBrokerToControllerResponseHeader(CommandHeader):
    clusterName: str | None = optional()
    brokerName: str | None = optional()
    masterBrokerId: Long | None = optional()
    masterAddress: str | None = optional()
    masterEpoch: int | None = optional()
    syncStateSetEpoch: int | None = optional()


@header
class GetReplicaInfoRequestHeader(CommandHeader):
    brokerName: str | None = optional()


@header
class GetReplicaInfoResponseHeader(CommandHeader):
    masterBrokerId: Long | None = optional()
    masterAddress: str | None = optional()
    masterEpoch: int | None = optional()


@header
class ElectMasterRequestHeader(CommandHeader):
    """A broker's own election request (Java ``ElectMasterRequestHeader.ofBrokerTrigger``)."""
    clusterName: str = required("")
    brokerName: str = required("")
    brokerId: Long = required(-1)
    designateElect: bool = required(False)
    invokeTime: Long | None = optional()


@header
class ElectMasterResponseHeader(CommandHeader):
    masterBrokerId: Long | None = optional()
    masterAddress: str | None = optional()
    masterEpoch: int | None = optional()
    syncStateSetEpoch: int | None = optional()


@header
class AlterSyncStateSetRequestHeader(CommandHeader):
    brokerName: str | None = optional()
    masterBrokerId: Long | None = optional()
    masterEpoch: int | None = optional()
    invokeTime: Long = optional(0)


@header
class NotifyBrokerRoleChangedRequestHeader(CommandHeader):
    """The controller's oneway NOTIFY_BROKER_ROLE_CHANGED to each live broker of a set."""
    masterAddress: str | None = optional()
    masterEpoch: int | None = optional()
    syncStateSetEpoch: int | None = optional()
    masterBrokerId: Long | None = optional()


@header
class AlterSyncStateSetResponseHeader(CommandHeader):
    """CONTROLLER_ALTER_SYNC_STATE_SET's answer (the controller writes it; a broker reads the body)."""
    newSyncStateSetEpoch: int = optional(0)


@header
class CleanControllerBrokerDataRequestHeader(CommandHeader):
    """CLEAN_BROKER_DATA (1011), ``mqadmin cleanBrokerMetadata``."""
    clusterName: str | None = optional()
    brokerName: str = required()
    brokerControllerIdsToClean: str | None = optional()
    isCleanLivingBroker: bool = optional(False)
    invokeTime: Long = optional(0)
