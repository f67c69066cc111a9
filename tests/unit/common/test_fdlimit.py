"""The open-file limit raised at start and the connection caps computed from it (issue 31 case 1)."""
from __future__ import annotations

import resource

import pytest

from rmqpy.common import fdlimit


def test_the_soft_limit_is_raised_to_the_hard_one(monkeypatch: pytest.MonkeyPatch) -> None:
    limits = {"now": (1024, 65536)}
    monkeypatch.setattr(resource, "getrlimit", lambda _: limits["now"])
    monkeypatch.setattr(resource, "setrlimit", lambda _, v: limits.update(now=v))
    got = fdlimit.raise_open_file_limit()
    assert (got.before, got.soft, got.hard, got.error) == (1024, 65536, 65536, "")
    assert limits["now"] == (65536, 65536)
    assert fdlimit.raise_open_file_limit() == fdlimit.OpenFileLimit(65536, 65536, 65536)  # already there


def test_a_refused_raise_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise ValueError("not allowed to raise maximum limit")
    monkeypatch.setattr(resource, "getrlimit", lambda _: (1024, resource.RLIM_INFINITY))
    monkeypatch.setattr(resource, "setrlimit", refuse)
    got = fdlimit.raise_open_file_limit()
    assert (got.soft, got.hard) == (1024, -1) and "not allowed" in got.error


def test_the_caps_leave_the_reserve_to_the_store() -> None:
    # 4,096 descriptors, 200 open: a quarter (1,024) kept, 3 a relayed gRPC connection
    assert fdlimit.port_caps(0, 0, 0, 3, limit=4096, held=200)[:2] == (957, 239)
    assert fdlimit.port_caps(0, 0, 2000, 3, limit=4096, held=200)[:2] == (632, 158)
    assert fdlimit.port_caps(0, 0, 0, 3, limit=1_048_576, held=200)[:2] == (262_077, 65_519)
    assert fdlimit.port_caps(0, 0, 0, 3, limit=1024, held=13)[:2] == (166, 41)  # half of a small limit kept
    assert fdlimit.port_caps(0, 0, 0, 3, limit=1024, held=900)[:2] == (1, 1)  # never 0 (that is "no cap")
    assert fdlimit.port_caps(500, 0, 0, 3)[:2] == (500, 125)
    assert fdlimit.port_caps(500, 600, 0, 3)[:2] == (500, 600)
    assert fdlimit.port_caps(-1, -1, 0, 3)[:2] == (0, 0)
    assert fdlimit.port_caps(0, 0, 0, 3, limit=-1, held=10)[:2] == (0, 0)  # unlimited: no cap


def test_open_files_counts_this_process() -> None:
    before = fdlimit.open_files()
    with open(__file__, "rb"):
        assert fdlimit.open_files() == before + 1
