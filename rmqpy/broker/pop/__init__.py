"""POP consumption (RocketMQ 5): the broker keeps each popped message's invisibility.

``service.PopService`` pops, acks and changes invisible times and returns Deferreds; the remoting
processors (``rmqpy/broker/processor/pop.py``) call it, for remoting clients and for the gRPC
endpoint's requests alike. A pop's result is typed (``result.PopResult``): the processor formats it
into the remoting header, the gRPC endpoint reads it as it is. ``revive.PopReviveService`` brings
un-acked messages back through the revive topic.
"""
