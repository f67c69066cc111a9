"""Recall handles (rmqpy/protocol/recall.py) as 5.3.3's RecallMessageHandle builds and decodes them."""
import base64

import pytest

from rmqpy.protocol import recall


def test_a_handle_is_url_safe_base64_of_v1_and_four_fields() -> None:
    h = recall.RecallHandle("Topic?", "broker-a", "1700000000001", "7F0000010001")
    text = h.encode()
    # Java's Base64.getUrlEncoder(): '-' and '_' for '+' and '/', '=' padding kept
    assert text == base64.urlsafe_b64encode(b"v1 Topic? broker-a 1700000000001 7F0000010001").decode()
    assert recall.decode(text) == h
    assert recall.decode(text.rstrip("=")) == h  # Java's decoder takes it without padding too


@pytest.mark.parametrize("handle", [
    None, "", "not base64!", "dj E=",  # empty, characters outside the URL-safe alphabet
    base64.urlsafe_b64encode(b"v2 T b 1 id").decode(),  # another version
    base64.urlsafe_b64encode(b"v1 T b 1").decode(),  # four fields
    base64.urlsafe_b64encode(b"v1 T b 1 ").decode(),  # a trailing empty field is dropped, as split(" ")
    base64.b64encode(b"v1 T b 1 id\xfb\xff").decode(),  # '+' or '/' are the other alphabet's
])
def test_a_malformed_handle_is_refused_with_javas_text(handle: str | None) -> None:
    with pytest.raises(ValueError, match="^recall handle is invalid$"):
        recall.decode(handle)


def test_more_fields_and_bad_utf8_are_taken_as_java_takes_them() -> None:
    assert recall.decode(base64.urlsafe_b64encode(b"v1 T b 1 id extra").decode()).message_id == "id"
    assert recall.decode(base64.urlsafe_b64encode(b"v1 T\xff b 1 id").decode()).topic == "T\ufffd"
