from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqpy.protocol import fastjson
from rmqpy.protocol.fastjson import JSONDecodeError, ObjectKey


def test_reads_unquoted_integer_keys_as_java_writes_them() -> None:
    assert fastjson.loads('{"offsetTable":{"T@G":{0:12,1:5}}}') == {"offsetTable": {"T@G": {0: 12, 1: 5}}}


def test_reads_object_keys_of_message_queue_maps() -> None:
    doc = fastjson.loads('{"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:{"brokerOffset":3}}}')
    (key, value), = doc["offsetTable"].items()
    assert isinstance(key, ObjectKey) and key["queueId"] == 1 and value == {"brokerOffset": 3}
    assert fastjson.dumps(doc) == '{"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:{"brokerOffset":3}}}'


def test_writes_sorted_keys_without_nulls_and_unquoted_int_keys() -> None:
    assert fastjson.dumps({"b": 1, "a": None, "m": {1: "x", 0: "y"}}) == '{"b":1,"m":{0:"y",1:"x"}}'
    assert fastjson.dumps({"m": {0: "y"}}, quote_keys=True) == '{"m":{"0":"y"}}'


def test_pretty_format_uses_tabs_like_fastjson() -> None:
    assert fastjson.dumps({"a": {"b": 1}}, pretty=True) == '{\n\t"a":{\n\t\t"b":1\n\t}\n}'


@pytest.mark.parametrize("bad", ["{", '{"a" 1}', "[1,,]", '"abc', "{}x", "tru", '{"a":"\\q"}'])
def test_invalid_text_raises_a_value_error_naming_the_position(bad: str) -> None:
    with pytest.raises(JSONDecodeError, match="position"):
        fastjson.loads(bad)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)


@given(json_values)
@settings(max_examples=300, deadline=None)
def test_standard_json_reads_like_the_stdlib(value: object) -> None:
    assert fastjson.loads(json.dumps(value)) == value
    assert json.loads(fastjson.dumps(value, ascii_only=True)) == _drop_null_values(value)


def _drop_null_values(value: object) -> object:
    if isinstance(value, dict):
        return {k: _drop_null_values(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_null_values(v) for v in value]
    return value


@given(st.text(max_size=60))
@settings(max_examples=1000, deadline=None)
def test_fuzz_loads_raises_only_value_errors(text: str) -> None:
    try:
        fastjson.loads(text)
    except ValueError:
        pass
