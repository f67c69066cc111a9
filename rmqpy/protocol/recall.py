"""Recall handles (RocketMQ 5.3.3's ``RecallMessageHandle``): what a 5.x broker answers a single send of
a delay (timer) message with, and what RECALL_MESSAGE takes back to cancel it before its time.

Version 1 is ``"v1 <topic> <brokerName> <timestamp> <messageId>"``, Base64 of its UTF-8 bytes with the
URL-safe alphabet (Java's ``Base64.getUrlEncoder()``: with ``=`` padding). The timestamp is the timer's
``TIMER_OUT_MS`` plus one and the message id its UNIQ_KEY (``SendMessageProcessor.attachRecallHandle``).
"""
from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

VERSION_1 = "v1"
INVALID = "recall handle is invalid"  # DecoderException's text, for every malformed handle


@dataclass(frozen=True)
class RecallHandle:
    topic: str
    broker_name: str
    timestamp: str
    message_id: str

    def encode(self) -> str:
        raw = " ".join((VERSION_1, self.topic, self.broker_name, self.timestamp, self.message_id))
        return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii")


def decode(handle: str | None) -> RecallHandle:
    """``RecallMessageHandle.decodeHandle``: ValueError(:data:`INVALID`) for an empty handle, one that is
    no URL-safe Base64 (padding optional, as Java's decoder), or whose text is not ``v1`` and four more
    fields (Java's ``split(" ")``: trailing empty fields dropped; malformed UTF-8 replaced, not refused)."""
    if not handle:
        raise ValueError(INVALID)
    text = handle.rstrip("=")
    if "+" in text or "/" in text:  # the other alphabet's: Java's URL decoder refuses them
        raise ValueError(INVALID)
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(INVALID) from None
    items = raw.decode("utf-8", errors="replace").split(" ")
    while items and items[-1] == "":
        items.pop()
    if len(items) < 5 or items[0] != VERSION_1:
        raise ValueError(INVALID)
    return RecallHandle(items[1], items[2], items[3], items[4])
