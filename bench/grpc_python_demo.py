"""The official Python client (rocketmq-python-client 5.1.2) against rmqpy's gRPC endpoint: N sends
one by one, then SimpleConsumer receive + ack of all of them; prints both times. Not a test.

    python bench/grpc_python_demo.py 127.0.0.1:8081 TOPIC 300 [SLEEP_AFTER_START] [BATCH]
"""
import sys
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

endpoint, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
config = ClientConfiguration(endpoint, Credentials())
producer = Producer(config, (topic,))
producer.startup()
t0 = time.time()
for i in range(n):
    msg = Message()
    msg.topic, msg.body, msg.tag = topic, f"hello {i}".encode(), "TagA"
    producer.send(msg)
t1 = time.time()
producer.shutdown()
print(f"sent {n} in {t1 - t0:.2f} s: {n / (t1 - t0):.0f}/s")
consumer = SimpleConsumer(config, "demo_group", {topic: FilterExpression()})
consumer.startup()
time.sleep(float(sys.argv[4]) if len(sys.argv) > 4 else 0)
got = 0
t0 = time.time()
while got < n and time.time() - t0 < 60:
    for m in consumer.receive(int(sys.argv[5]) if len(sys.argv) > 5 else 32, 15):
        consumer.ack(m)
        got += 1
t1 = time.time()
consumer.shutdown()
print(f"received+acked {got} in {t1 - t0:.2f} s")
