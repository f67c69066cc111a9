"""groupRetryPolicy (rmqpy/protocol/bodies/retry_policy.py): 5.3.3's nextDelayDuration and the
shapes updateSubGroup refuses."""
from __future__ import annotations

import pytest

from rmqpy.protocol.bodies import retry_policy
from rmqpy.protocol.bodies.retry_policy import CUSTOMIZED, EXPONENTIAL, RetryPolicy, of_group, parse


def test_the_default_is_the_delay_levels_from_the_third_on() -> None:
    p = parse(None)
    assert p.type == CUSTOMIZED and len(p.next_ms) == 18
    # CustomizedRetryPolicy.nextDelayDuration: next[times + 2], clamped to the last (2 h)
    assert [p.next_delay_ms(t) for t in (-1, 0, 1, 15, 16, 99)] == [10_000, 10_000, 30_000, 7_200_000,
                                                                  7_200_000, 7_200_000]


def test_customized_and_exponential_policies() -> None:
    p = parse({"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [6000, 1000, 2000, 3000]}})
    assert p.next_ms == (6000, 1000, 2000, 3000) and p.next_delay_ms(0) == 2000 and p.next_delay_ms(5) == 3000
    e = parse({"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 1000, "max": 60_000, "multiplier": 3}})
    assert e == RetryPolicy(EXPONENTIAL, initial_ms=1000, max_ms=60_000, multiplier=3)
    assert [e.next_delay_ms(t) for t in (0, 1, 2, 3, 4, 1000)] == [1000, 3000, 9000, 27_000, 60_000, 60_000]
    # a type without its policy object: that type's defaults (5 s, 2 h, x2) / the default list
    assert parse({"type": "EXPONENTIAL"}) == RetryPolicy(EXPONENTIAL)
    assert parse({"type": "CUSTOMIZED"}) == retry_policy.DEFAULT


@pytest.mark.parametrize("value, says", [
    ([], "must be an object"),
    ({"type": "LINEAR"}, "type must be"),
    ({"customizedRetryPolicy": {"next": []}}, "list of 1 to 256"),
    ({"customizedRetryPolicy": {"next": [1000] * 257}}, "list of 1 to 256"),
    ({"customizedRetryPolicy": {"next": [1000, -1]}}, "next must be an integer"),
    ({"customizedRetryPolicy": {"next": ["1s"]}}, "next must be an integer"),
    ({"customizedRetryPolicy": {"next": [True]}}, "next must be an integer"),
    ({"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 10**15}}, "initial must be"),
    ({"type": "EXPONENTIAL", "exponentialRetryPolicy": {"multiplier": 1.5}}, "multiplier must be"),
    ({"type": "EXPONENTIAL", "exponentialRetryPolicy": "fast"}, "must be an object"),
])
def test_malformed_policies_are_refused_with_the_reason(value, says) -> None:
    with pytest.raises(ValueError, match=says):
        parse(value)
    assert of_group({"groupRetryPolicy": value}) == retry_policy.DEFAULT  # a stored one reads as the default
