"""The official Python gRPC client (rocketmq-python-client 5.1.2, PyPI) as a test driver.

Run in a client host: ``python grpc_client.py ENDPOINT COMMAND ...``; prints one JSON object per
line (``sent``, ``received``, ``done``) on stdout. Commands:

* ``produce TOPIC N [GROUP]``: Producer.send N messages (bodies ``grpc-{i}``), in message group GROUP
  if given (a FIFO topic);
* ``receive TOPIC GROUP N INVISIBLE_S [--no-ack] [--linger S]``: SimpleConsumer.receive until N
  messages arrived (acking each unless --no-ack), then keep receiving for --linger seconds to
  catch extra deliveries; exits 1 if fewer than N arrived within 60 s. ``--skip BODY``: the first
  time BODY arrives, ack neither it nor what follows it in its batch (a FIFO consumer that failed).
"""
from __future__ import annotations

import json
import sys
import time


def emit(kind: str, **fields) -> None:
    print(json.dumps({"event": kind, **fields}), flush=True)


def main(argv: list[str]) -> int:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

    endpoint, command, *rest = argv
    config = ClientConfiguration(endpoint, Credentials(), request_timeout=10)
    if command == "produce":
        topic, n = rest[0], int(rest[1])
        producer = Producer(config, (topic,))
        producer.startup()
        try:
            for i in range(n):
                m = Message()
                m.topic, m.body, m.tag = topic, f"grpc-{i}".encode(), "TagA"
                if len(rest) > 2:
                    m.message_group = rest[2]
                receipt = producer.send(m)
                emit("sent", msgId=receipt.message_id, body=f"grpc-{i}")
        finally:
            producer.shutdown()
        emit("done", ok=True)
        return 0
    if command == "receive":
        topic, group, n, invisible = rest[0], rest[1], int(rest[2]), int(rest[3])
        ack = "--no-ack" not in rest
        linger = float(rest[rest.index("--linger") + 1]) if "--linger" in rest else 0.0
        skip = rest[rest.index("--skip") + 1] if "--skip" in rest else None
        consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=5)
        consumer.startup()
        time.sleep(2)  # the client sends its settings over the telemetry stream after startup
        got = 0
        deadline = time.time() + 60
        stop_at = None
        try:
            while time.time() < (stop_at or deadline):
                skipping = False
                for msg in consumer.receive(16, invisible):
                    body = msg.body.decode()
                    if body == skip:
                        skip, skipping = None, True
                    emit("received", msgId=msg.message_id, body=body, attempt=msg.delivery_attempt,
                         topic=msg.topic, acked=ack and not skipping)
                    if ack and not skipping:
                        consumer.ack(msg)
                        got += 1
                    elif not ack:
                        got += 1
                if got >= n and stop_at is None:
                    stop_at = time.time() + linger
        finally:
            consumer.shutdown()
        emit("done", ok=got >= n, received=got)
        return 0 if got >= n else 1
    raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
