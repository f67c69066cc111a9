"""The activities of the gRPC endpoint, one module per call family, as 5.3.3's proxy splits them
(``org.apache.rocketmq.proxy.grpc.v2``): ``route`` (QueryRoute, QueryAssignment), ``send``
(SendMessage), ``receive`` (ReceiveMessage), ``ack`` (AckMessage), ``invisible``
(ChangeInvisibleDuration), ``transaction`` (EndTransaction), ``client`` (Heartbeat, Telemetry
settings, NotifyClientTermination) and ``dlq`` (ForwardMessageToDeadLetterQueue).
:class:`rmqpy.proxy.grpc.activities.MessagingActivities` routes each call to its activity.
"""
