"""CPU of one AckMessage of one entry on the reactor's side, this tree's activity vs another checkout's.

    python bench/report/grpc/ack_cost.py /tmp/rmqpy-grpc29-base [-n 3000] [--repeat 7]

Not a test. One broker on a task.Clock (tests/unit's make_broker), one topic; a send and a
ReceiveMessage give a real receipt handle; then ``AckMessageActivity.ack_message`` of that handle
``n`` times (each a real ACK_MESSAGE through the dispatcher and a revive-topic put), alternately
with this tree's activity and with the same class loaded from the other checkout's
``rmqpy/proxy/grpc/activity/ack.py`` (the rest of rmqpy is this tree's). Prints the minimum
process CPU µs per ack of each over the repeats.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from rocketmq.grpc_protocol import definition_pb2 as pb  # noqa: E402
from rocketmq.grpc_protocol import service_pb2 as spb  # noqa: E402

from rmqpy.protocol.bodies.topic import TopicConfig  # noqa: E402
from rmqpy.proxy.grpc.activities import MessagingActivities  # noqa: E402
from rmqpy.proxy.grpc.activity.ack import AckMessageActivity  # noqa: E402
from tests.unit.broker.helpers import make_broker  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("other", type=Path, help="the other checkout")
    ap.add_argument("-n", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()
    spec = importlib.util.spec_from_file_location("other_ack", a.other / "rmqpy/proxy/grpc/activity/ack.py")
    assert spec is not None and spec.loader is not None
    other = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(other)
    with tempfile.TemporaryDirectory() as tmp:
        broker, _ = make_broker(Path(tmp) / "b")
        tc = TopicConfig("AckT")
        tc.readQueueNums = tc.writeQueueNums = 1
        broker.topic_config_manager.update_topic_config(tc)
        acts = MessagingActivities(broker, broker.dispatcher, 8081)
        ch = acts.channel_of("client-1", "127.0.0.1:5000")
        m = pb.Message(topic=pb.Resource(name="AckT"), body=b"x" * 128)
        m.system_properties.message_id = "MSGID1"
        acts.send_message(spb.SendMessageRequest(messages=[m]), ch)
        req = spb.ReceiveMessageRequest(group=pb.Resource(name="g1"), batch_size=1,
                                        message_queue=pb.MessageQueue(topic=pb.Resource(name="AckT"), id=0))
        req.invisible_duration.seconds = 300
        req.long_polling_timeout.seconds = 0
        got: list = []
        acts.receive_message(req, ch, 10_000).addCallback(got.append)
        handle = next(r.message for r in got[0] if r.WhichOneof("content") == "message").system_properties.receipt_handle
        ack = spb.AckMessageRequest(group=pb.Resource(name="g1"), topic=pb.Resource(name="AckT"),
                                    entries=[spb.AckMessageEntry(message_id="MSGID1", receipt_handle=handle)])
        variants = {"this": AckMessageActivity(acts.ctx, acts.receipts),
                    "other": other.AckMessageActivity(acts.ctx, acts.receipts)}
        best = {k: float("inf") for k in variants}
        for r in range(a.repeat):
            for name in (list(variants) if r % 2 == 0 else list(variants)[::-1]):
                act, codes = variants[name], []
                done = codes.append
                t0 = time.process_time()
                for _ in range(a.n):
                    act.ack_message(ack, ch).addCallback(lambda resp, done=done: done(resp.status.code))
                best[name] = min(best[name], (time.process_time() - t0) / a.n * 1e6)
                assert codes == [pb.Code.OK] * a.n, set(codes)
        broker.shutdown()
    print(" ".join(f"{k} {v:.1f} µs/ack" for k, v in best.items()), f"this/other {best['this'] / best['other']:.3f}")


if __name__ == "__main__":
    main()
