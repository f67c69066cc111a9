"""The gRPC endpoint of RocketMQ 5 clients (apache.rocketmq.v2.MessagingService)."""
