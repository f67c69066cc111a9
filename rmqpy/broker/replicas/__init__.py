"""Controller mode (RIP-44), the broker's side: Java's ``broker/controller/ReplicasManager`` and the
controller calls of ``BrokerOuterAPI``.

``client.py`` the requests to the controllers and the list of their addresses; ``identity.py``
the ``brokerIdentity`` files; ``ha.py`` the seam to the AutoSwitch HA side and its master-only
stand-in; ``manager.py`` the replicas manager, a service of the broker's tree. The controller's
NOTIFY_BROKER_ROLE_CHANGED and mqadmin's GET_BROKER_EPOCH_CACHE are answered by
``rmqpy/broker/processor/replicas.py``.
"""
