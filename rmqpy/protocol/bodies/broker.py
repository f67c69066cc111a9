"""Broker-side bodies and config-file shapes: SubscriptionGroupConfig and the offset tables."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from rmqpy.protocol.bodies.safe import body_decoder


@dataclass
class SubscriptionGroupConfig:
    groupName: str
    consumeEnable: bool = True
    consumeFromMinEnable: bool = True
    consumeBroadcastEnable: bool = True
    retryQueueNums: int = 1
    retryMaxTimes: int = 16
    brokerId: int = 0
    whichBrokerWhenConsumeSlowly: int = 1
    notifyConsumerIdsChangedEnable: bool = True
    # 5.x extras are preserved when read from a 5.x file and written back
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = dict(self.extra)
        for f in fields(self):
            if f.name != "extra":
                out[f.name] = getattr(self, f.name)
        return out

    @classmethod
    @body_decoder
    def from_json(cls, obj: dict[str, Any]) -> "SubscriptionGroupConfig":
        known = {f.name for f in fields(cls)} - {"extra"}
        cfg = cls(groupName=str(obj.get("groupName") or ""))
        for key, value in obj.items():
            if key in known and key != "groupName" and value is not None:
                kind = type(getattr(cfg, key))
                setattr(cfg, key, bool(value) if kind is bool else int(value))
            elif key not in known:
                cfg.extra[key] = value
        return cfg
