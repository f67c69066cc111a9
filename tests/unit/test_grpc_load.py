"""tests/interop/grpc_load.py sends as the official producer does: a throttled send (TOO_MANY_REQUESTS) is
sent again after a backoff, up to 3 attempts, and counted; any other failure is an error of the report."""
from __future__ import annotations

from typing import Any

import pytest

grpc_load = pytest.importorskip("tests.interop.grpc_load")
pb = grpc_load.pb


class _Stub:
    def __init__(self, codes: list[int]) -> None:
        self.codes = codes
        self.calls = 0

    def SendMessage(self, request: Any, metadata: Any, timeout: float) -> Any:  # noqa: N802 (gRPC's name)
        code = self.codes[min(self.calls, len(self.codes) - 1)]
        self.calls += 1
        return grpc_load.spb.SendMessageResponse(status=pb.Status(code=code, message="broker busy"))


@pytest.mark.parametrize("codes,sent,throttled,errors,calls", [
    ([pb.Code.OK], True, 0, 0, 1),
    ([pb.Code.TOO_MANY_REQUESTS, pb.Code.TOO_MANY_REQUESTS, pb.Code.OK], True, 2, 0, 3),
    ([pb.Code.TOO_MANY_REQUESTS], False, 2, 1, 3),  # three attempts, then it is the application's error
    ([pb.Code.INTERNAL_SERVER_ERROR, pb.Code.OK], False, 0, 1, 1),  # not throttling: an error at once
])
def test_a_throttled_send_is_sent_again_and_nothing_else_is(monkeypatch, codes, sent, throttled, errors,
                                                            calls) -> None:
    monkeypatch.setattr(grpc_load, "THROTTLED_BACKOFF_S", 0)
    load = grpc_load.GrpcLoad("127.0.0.1:1")
    load.stub = _Stub(codes)
    try:
        assert load._send("k", pb.Message()) is sent
    finally:
        load.channel.close()
    assert (bool(load.report.sent), load.report.throttled, len(load.report.errors)) == (sent, throttled, errors)
    assert load.stub.calls == calls
