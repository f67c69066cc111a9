"""The official Python gRPC client (rocketmq-python-client 5.1.2, PyPI) as a test driver.

Run in a client host: ``python grpc_client.py ENDPOINT COMMAND ...``; prints one JSON object per
line (``sent``, ``received``, ``done``) on stdout. Commands:

* ``produce TOPIC N [GROUP] [--delay-s D] [--keys TEMPLATE] [--continue-on-error] [--pause S]``:
  Producer.send N messages (bodies ``grpc-{i}``, keys TEMPLATE with ``{i}`` the index; a failed send
  with --continue-on-error is an ``error`` line with its index, and the next one is sent 50 ms later;
  --pause: S seconds between two sends, a steady producer rather than one as fast as it can), in
  message group GROUP if given (a FIFO topic), or with a delivery timestamp D s after the send (a
  DELAY topic; ``sent`` then carries ``deliverAt``, epoch seconds). 5.1.2 writes
  ``Message.delivery_timestamp`` into the Timestamp's seconds although its docstring says ms: a
  whole number of seconds is what works;
* ``receive TOPIC GROUP N INVISIBLE_S [--no-ack] [--linger S]``: SimpleConsumer.receive until N
  messages arrived (acking each unless --no-ack), then keep receiving for --linger seconds to
  catch extra deliveries; exits 1 if fewer than N arrived within 60 s. ``--skip BODY``: the first
  time BODY arrives, ack neither it nor what follows it in its batch (a FIFO consumer that failed).
  ``--wait S``: give up after S seconds instead of 60 (with N 0: receive for S seconds).
* ``transaction TOPIC commit|rollback|check``: Producer with a TransactionChecker that answers
  COMMIT; sends one half message (body ``tx-<mode>``), then commits, rolls back, or (``check``)
  ends nothing and waits up to 60 s for the broker's check-back (``checked``), staying up 3 s
  after it so that the checker's EndTransaction goes out.
* ``push TOPIC GROUP N [--fail BODY [--fail-times K]] [--wait S]``: PushConsumer until N messages
  were consumed successfully (S s at most, 60 by default), then 2 s more; the listener answers FAILURE for BODY every time, or
  its first K times (``consumed`` lines in the order the listener saw them).

``received`` and ``consumed`` lines carry ``at``, the client's epoch seconds when it got the message.
* ``--hold S`` (produce, receive): stay started S seconds before shutting down, after printing
  ``holding`` (mqadmin producerConnection / consumerConnection look meanwhile).
* ``--tls``: the client's tls_enable (roots from GRPC_DEFAULT_SSL_ROOTS_FILE_PATH).
* ``--credentials AK:SK``: the client's ``Credentials(ak, sk)`` (it signs every call); produce and
  receive then print ``error`` with what the client raised, and exit 1, when a call is refused
  (the client's error log lines also go to stderr).
"""
from __future__ import annotations

import json
import sys
import time


def emit(kind: str, **fields) -> None:
    print(json.dumps({"event": kind, **fields}), flush=True)


def main(argv: list[str]) -> int:
    from rocketmq import ClientConfiguration, Credentials

    endpoint, command, *rest = argv
    tls = "--tls" in rest
    if tls:
        rest.remove("--tls")
    hold = float(_opt(rest, "--hold", "0"))
    ak, _, sk = _opt(rest, "--credentials", ":").partition(":")
    config = ClientConfiguration(endpoint, Credentials(ak, sk), request_timeout=10)
    if "--credentials" in rest:
        import logging  # the client's own error lines (a refused route query) on stderr too
        handler = logging.StreamHandler(sys.stderr)
        handler.setLevel(logging.ERROR)
        logging.getLogger("rocketmq-python-client").addHandler(handler)
        try:
            return run(config, command, rest, tls, hold)
        except Exception as exc:  # a refused call: what the client raised, for the test to read
            emit("error", error=f"{type(exc).__name__}: {exc}")
            return 1
    return run(config, command, rest, tls, hold)


def run(config, command: str, rest: list[str], tls: bool, hold: float) -> int:
    from rocketmq import FilterExpression, Message, Producer, SimpleConsumer
    if command == "produce":
        topic, n = rest[0], int(rest[1])
        producer = Producer(config, (topic,), tls_enable=tls)
        producer.startup()
        try:
            delay_s = _opt(rest, "--delay-s", None)
            keys = _opt(rest, "--keys", None)
            go_on = "--continue-on-error" in rest
            pause = float(_opt(rest, "--pause", "0"))
            for i in range(n):
                m = Message()
                m.topic, m.body, m.tag = topic, f"grpc-{i}".encode(), "TagA"
                if len(rest) > 2 and not rest[2].startswith("--"):
                    m.message_group = rest[2]
                extra = {}
                if keys is not None:
                    m.keys = extra["keys"] = keys.replace("{i}", str(i))
                if delay_s is not None:
                    m.delivery_timestamp = int(time.time()) + int(delay_s)
                    extra["deliverAt"] = m.delivery_timestamp
                try:
                    receipt = producer.send(m)
                except Exception as exc:  # noqa: BLE001 (--continue-on-error: counted, the next one sent)
                    if not go_on:
                        raise
                    emit("error", i=i, error=f"{type(exc).__name__}: {exc}")
                    time.sleep(0.05)  # an application's pause: some errors come at once, a loop would spin
                    continue
                emit("sent", i=i, msgId=receipt.message_id, body=f"grpc-{i}", **extra)
                time.sleep(pause)
            _hold(hold)
        finally:
            producer.shutdown()
        emit("done", ok=True)
        return 0
    if command == "transaction":
        return transaction(config, rest[0], rest[1])
    if command == "push":
        return push(config, rest[0], rest[1], int(rest[2]), _opt(rest, "--fail", None),
                    int(_opt(rest, "--fail-times", "-1")), float(_opt(rest, "--wait", "60")))
    if command == "receive":
        topic, group, n, invisible = rest[0], rest[1], int(rest[2]), int(rest[3])
        ack = "--no-ack" not in rest
        linger = float(_opt(rest, "--linger", "0"))
        skip = _opt(rest, "--skip", None)
        consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=5, tls_enable=tls)
        consumer.startup()
        time.sleep(2)  # the client sends its settings over the telemetry stream after startup
        _hold(hold)
        got = 0
        deadline = time.time() + float(_opt(rest, "--wait", "60"))
        stop_at = None
        try:
            while time.time() < (stop_at or deadline):
                skipping = False
                for msg in consumer.receive(16, invisible):
                    body = msg.body.decode()
                    if body == skip:
                        skip, skipping = None, True
                    emit("received", msgId=msg.message_id, body=body, attempt=msg.delivery_attempt,
                         topic=msg.topic, acked=ack and not skipping, at=time.time())
                    if ack and not skipping:
                        consumer.ack(msg)
                        got += 1
                    elif not ack:
                        got += 1
                if n > 0 and got >= n and stop_at is None:
                    stop_at = time.time() + linger
        finally:
            consumer.shutdown()
        emit("done", ok=got >= n, received=got)
        return 0 if got >= n else 1
    raise SystemExit(f"unknown command {command}")


def _opt(rest: list[str], name: str, default):
    return rest[rest.index(name) + 1] if name in rest else default


def _hold(seconds: float) -> None:
    if seconds > 0:
        emit("holding")
        time.sleep(seconds)


def push(config, topic: str, group: str, n: int, fail: str | None, fail_times: int, wait: float) -> int:
    import threading

    from rocketmq import ConsumeResult, FilterExpression, MessageListener, PushConsumer

    ok = []
    enough = threading.Event()

    class Listener(MessageListener):
        def consume(self, message) -> ConsumeResult:
            nonlocal fail_times
            body = message.body.decode()
            result = ConsumeResult.SUCCESS
            if body == fail and fail_times != 0:
                result, fail_times = ConsumeResult.FAILURE, fail_times - 1
            emit("consumed", msgId=message.message_id, body=body, attempt=message.delivery_attempt,
                 result=result.name, at=time.time())
            if result == ConsumeResult.SUCCESS:
                ok.append(body)
                if len(ok) >= n:
                    enough.set()
            return result

    consumer = PushConsumer(config, group, Listener(), {topic: FilterExpression()})
    consumer.startup()
    try:
        enough.wait(wait)
        time.sleep(2)
    finally:
        consumer.shutdown()
    emit("done", ok=len(ok) >= n, consumed=len(ok))
    return 0 if len(ok) >= n else 1


def transaction(config, topic: str, mode: str) -> int:
    import threading

    from rocketmq import Message, Producer, TransactionChecker, TransactionResolution

    checked = threading.Event()

    class Checker(TransactionChecker):
        def check(self, message) -> TransactionResolution:
            emit("checked", msgId=message.message_id, body=message.body.decode())
            checked.set()
            return TransactionResolution.COMMIT

    producer = Producer(config, (topic,), Checker())
    producer.startup()
    try:
        tx = producer.begin_transaction()
        m = Message()
        m.topic, m.body, m.tag = topic, f"tx-{mode}".encode(), "TagA"
        receipt = producer.send(m, tx)
        emit("sent", msgId=receipt.message_id, body=f"tx-{mode}", transactionId=receipt.transaction_id)
        if mode == "commit":
            tx.commit()
        elif mode == "rollback":
            tx.rollback()
        elif not checked.wait(60):
            emit("done", ok=False)
            return 1
        else:
            time.sleep(3)  # the checker's EndTransaction goes out from the client's own thread
        emit("ended", mode=mode)
    finally:
        producer.shutdown()
    emit("done", ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
