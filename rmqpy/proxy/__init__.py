"""What RocketMQ 5's proxy module serves, inside the broker process (rmqpy/proxy/grpc/)."""
