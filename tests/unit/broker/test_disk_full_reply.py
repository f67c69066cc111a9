"""What a producer sees when the broker's disk is full: Java's SERVICE_NOT_AVAILABLE reply."""
from rmqpy.protocol.codes import ResponseCode
from rmqpy.store import cleanup, space, space_guard

from .helpers import FakeChannel, call, make_broker, pull_request, send_request


def test_full_disk_send_gets_javas_code_and_remark_and_pulls_go_on(tmp_path, monkeypatch):
    broker, clock = make_broker(tmp_path)
    try:
        ch = FakeChannel()
        assert call(broker, ch, send_request("TDF", b"before")).code == ResponseCode.SUCCESS
        ratio = [0.93]
        monkeypatch.setattr(cleanup, "disk_used_ratio", lambda p: ratio[0])
        monkeypatch.setattr(space_guard, "disk_used_ratio", lambda p: ratio[0])
        monkeypatch.setattr(space, "disk_used_ratio", lambda p: ratio[0] if "/index" not in p else -1.0)
        broker.message_store.delete_expired_files()  # the clean-resource pass marks the disk full
        resp = call(broker, ch, send_request("TDF", b"refused"))
        assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE == 14
        assert resp.remark == ("service not available now. It may be caused by one of the following reasons: "
                               "the broker's disk is full [CL:  0.93 CQ:  0.93 INDEX: -1.00], messages are put "
                               "to the slave, message store has been shut down, etc.")
        resp = call(broker, ch, pull_request("TDF", "GDF", suspend_ms=0))
        assert resp.code == ResponseCode.SUCCESS and b"before" in resp.body
        ratio[0] = 0.80
        clock.advance(0.2)
        assert call(broker, ch, send_request("TDF", b"after")).code == ResponseCode.SUCCESS
    finally:
        broker.shutdown()
