"""Frames captured from the real Java name server, broker, client 4.9.8/5.3.3 and mqadmin
(``python -m tests.interop.capture_golden``): each decodes, re-encodes to the same bytes,
and its JSON body parses."""
from __future__ import annotations

from pathlib import Path

import pytest

from rmqpy.protocol import command as codec
from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.topic import RegisterBrokerBody
from rmqpy.protocol.codes import RequestCode
from tests.interop.recorder import TO_SERVER, read_frames

GOLDEN = Path(__file__).resolve().parents[2] / "data" / "golden"
FILES = sorted(GOLDEN.glob("*.frames"))


def _frames(path: Path):
    return read_frames(path)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_captured_frame_round_trips_byte_for_byte(path: Path) -> None:
    frames = _frames(path)
    assert len(frames) > 20
    for tag, conn, _direction, frame in frames:
        cmd = codec.decode(frame[4:])
        assert codec.encode(cmd) == frame, f"{tag} conn {conn}: {cmd!r}"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_captured_json_bodies_parse(path: Path) -> None:
    parsed = 0
    for _tag, _conn, _direction, frame in _frames(path):
        cmd = codec.decode(frame[4:])
        body = cmd.body or b""
        if body[:1] in (b"{", b"[") and cmd.code != RequestCode.SEND_MESSAGE_V2:
            fastjson.loads(body)
            parsed += 1
    assert parsed > 5


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_captured_requests_cover_the_name_server_and_broker_paths(path: Path) -> None:
    requests = [codec.decode(f[4:]) for t, c, d, f in _frames(path) if d == TO_SERVER]
    codes = {r.code for r in requests if not r.is_response}
    assert {RequestCode.REGISTER_BROKER, RequestCode.GET_ROUTEINFO_BY_TOPIC,
            RequestCode.GET_BROKER_CLUSTER_INFO, RequestCode.PUT_KV_CONFIG} <= codes
    registered: set[str] = set()
    for request in requests:
        if request.code == RequestCode.REGISTER_BROKER:
            compressed = (request.ext_fields or {}).get("compressed") == "true"
            body = RegisterBrokerBody.decode(request.body, compressed)
            registered |= set(body.topicConfigSerializeWrapper.topicConfigTable)
    assert {"TBW102", "GoldenTopic"} <= registered
