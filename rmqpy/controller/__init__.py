"""rmqpy's controller (``twistd rmq-controller``): RocketMQ 5's controller on PySyncObj (issue 32)."""
