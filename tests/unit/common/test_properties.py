"""rmqpy.common.properties: Java Properties syntax, the escaping writer, typed application."""
from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqpy.common.properties import PropertiesError, apply_properties, format_properties, parse_properties, store_properties

# any text: controls, separators, non-ASCII and supplementary characters; no surrogates (Cs): hypothesis
# drew '\ud800\udc00', which Java's UTF-16 strings (and so the reader) take as the one character U+10000
any_text = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=("Cs",)), max_size=40)


@settings(max_examples=500)
@given(st.dictionaries(any_text, any_text, max_size=8))
def test_any_dict_round_trips(props: dict[str, str]) -> None:
    text = store_properties(props.items())
    assert text.isascii()
    assert parse_properties(text) == props


@settings(max_examples=500)
@given(any_text, any_text)
def test_a_value_never_creates_a_key(key: str, value: str) -> None:
    text = store_properties([("msgTraceTopicName", value), (key, "v")])
    assert text.count("\n") == 2          # one line per key, whatever they hold
    assert set(parse_properties(text)) == {"msgTraceTopicName", key}


@settings(max_examples=300)
@given(st.dictionaries(st.from_regex(r"[A-Za-z][A-Za-z0-9.]{0,20}", fullmatch=True), any_text, max_size=8))
def test_get_config_text_reads_back_as_what_the_server_holds(props: dict[str, str]) -> None:
    """GET_BROKER_CONFIG / -p keep Java's look (``a=127.0.0.1:9876``) yet parse back exactly."""
    assert parse_properties(format_properties(props.items())) == props
    assert format_properties([("namesrvAddr", "127.0.0.1:9876;h:1"), ("on", True)]) == (
        "namesrvAddr=127.0.0.1:9876;h:1\non=true\n")


def test_the_attack_of_issue_11_stays_one_value() -> None:
    text = store_properties([("msgTraceTopicName", "X\ntls.server.mode=disabled")])
    assert text == "msgTraceTopicName=X\\ntls.server.mode\\=disabled\n"
    assert parse_properties(text) == {"msgTraceTopicName": "X\ntls.server.mode=disabled"}


def test_java_escapes() -> None:
    assert store_properties([("a b", " lead mid "), ("k", "é😀\t#!:=\\")]) == (
        "a\\ b=\\ lead mid \n" "k=\\u00E9\\uD83D\\uDE00\\t\\#\\!\\:\\=\\\\\n")


@pytest.mark.parametrize("text, expected", [
    ("a=b", {"a": "b"}),
    ("a : b  ", {"a": "b  "}),              # trailing blanks belong to the value, as in Java
    ("a b c", {"a": "b c"}),
    ("a:=b", {"a": "=b"}),
    ("  # c\n! c\nk=v", {"k": "v"}),
    ("a=one\\\n    two", {"a": "onetwo"}),
    ("a=b\\\n#c", {"a": "b#c"}),            # a continuation line is never a comment
    ("a=b\\\r\n c\r\nd=e", {"a": "bc", "d": "e"}),
    ("a=b\\\\\nc=d", {"a": "b\\", "c": "d"}),  # an even number of backslashes does not continue
    ("k\\ e\\=y=v\\u0041", {"k e=y": "vA"}),
    ("a=b\\", {"a": "b"}),                   # a backslash at EOF is dropped
    ("lonely", {"lonely": ""}),
])
def test_parse_as_java_load(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


def test_malformed_unicode_escape_is_an_error() -> None:
    with pytest.raises(PropertiesError, match="Malformed"):
        parse_properties("a=\\u12G4")


@dataclass
class Cfg:
    port: int = 1
    name: str = "n"
    on: bool = False


@pytest.mark.parametrize("raw", ["abc", "1_000", "\u0661", "", "99999999999999999999"])
def test_a_bad_int_refuses_the_whole_update(raw: str) -> None:
    cfg = Cfg()
    with pytest.raises(PropertiesError, match="port"):
        apply_properties([cfg], {"name": "changed", "port": raw})
    assert cfg == Cfg()                      # nothing half applied


def test_values_are_typed_and_strings_trimmed_as_java() -> None:
    cfg = Cfg()
    assert apply_properties([cfg], {"port": " 42 ", "name": " x\n", "on": "TRUE", "other": "1"}) == ["other"]
    assert cfg == Cfg(port=42, name="x", on=True)
