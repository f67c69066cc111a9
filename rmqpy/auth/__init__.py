"""RocketMQ 5.x authentication and authorization (authenticationEnabled / authorizationEnabled):
users, ACL policies and their checks, after Java's ``rocketmq-auth`` module."""
