"""Java's ``FAQUrl``: the hint appended to the remarks of refused requests."""
from __future__ import annotations

FAQ_URL = "http://rocketmq.apache.org/docs/faq/"


def suggest_todo(url: str = FAQ_URL) -> str:
    return f"\nSee {url} for further details."
