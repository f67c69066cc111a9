"""What the name server's request processor sees of the name server.

:class:`~rmqpy.namesrv.controller.NamesrvController` builds the route table, the KV store and
the processor; the processor gets the controller typed as :class:`Namesrv`, so the controller
imports the processor and the processor does not import the controller back (as
:mod:`rmqpy.broker.api` does for the broker).
"""
from __future__ import annotations

from typing import Any, Protocol

from rmqpy.namesrv.config import NamesrvConfig
from rmqpy.namesrv.kvconfig import KVConfigManager
from rmqpy.namesrv.routeinfo import RouteInfoManager


class Namesrv(Protocol):
    """The name server as its processor uses it (Java hands it ``NamesrvController``)."""

    config: NamesrvConfig
    routes: RouteInfoManager
    kv: KVConfigManager
    clock: Any  # IReactorTime: the rate-limited log lines' buckets run on it

    def update_config(self, props: dict[str, str]) -> None:
        """UPDATE_NAMESRV_CONFIG: apply the properties to the name server's config objects."""
        ...

    def all_configs_text(self) -> str:
        """GET_NAMESRV_CONFIG: every config object as properties text."""
        ...
