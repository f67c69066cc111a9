"""A body sent in parts (a pull's records, command.encode_parts) is the same frame on the wire
as the joined body sent whole."""

from twisted.internet import task
from twisted.internet.testing import StringTransport

from rmqpy.protocol import command as codec
from rmqpy.protocol.codes import ResponseCode
from rmqpy.protocol.command import RemotingCommand, SerializeType
from rmqpy.remoting.protocol import RemotingProtocol

PARTS = [b"\x00\x00\x00\x10record-one..", b"", b"record-two" * 300, "é".encode()]


def _pair(serialize_type: int) -> tuple[RemotingCommand, RemotingCommand]:
    fields = {"nextBeginOffset": "7", "minOffset": "0", "maxOffset": "9", "suggestWhichBrokerId": "0"}
    whole = RemotingCommand(code=ResponseCode.SUCCESS, opaque=42, flag=1, ext_fields=dict(fields),
                            body=b"".join(PARTS), serialize_type=serialize_type)
    parts = RemotingCommand(code=ResponseCode.SUCCESS, opaque=42, flag=1, ext_fields=dict(fields),
                            body_parts=list(PARTS), serialize_type=serialize_type)
    return whole, parts


def test_the_parts_frame_is_the_whole_frame():
    for st in (SerializeType.JSON, SerializeType.ROCKETMQ):
        whole, parts = _pair(st)
        assert b"".join(codec.encode_parts(parts)) == codec.encode(whole) == codec.encode(parts)
        assert codec.encode_parts(whole) == [codec.encode(whole)]
        back = codec.decode(b"".join(codec.encode_parts(parts))[4:])
        assert back.body == b"".join(PARTS) and back.opaque == 42


def test_a_connection_writes_the_same_bytes():
    out = []
    for cmd in _pair(SerializeType.JSON):
        p = RemotingProtocol(None, task.Clock())
        t = StringTransport()
        p.makeConnection(t)
        p.send_command(cmd)
        out.append(t.value())
    assert out[0] == out[1] and len(out[0]) > 3000
