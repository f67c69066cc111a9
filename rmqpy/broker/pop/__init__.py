"""POP consumption (RocketMQ 5): the broker keeps each popped message's invisibility.

``service.PopService`` pops, acks and changes invisible times and returns Deferreds, so the
remoting processors (``rmqpy/broker/processor/pop.py``) and a gRPC front end can both call it;
``revive.PopReviveService`` brings un-acked messages back through the revive topic.
"""
