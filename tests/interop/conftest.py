"""Fixtures of the interop suite: built Java jars and isolated client hosts."""
from __future__ import annotations

import pytest

from tests.interop import grpcpy, isolation, jvm

VERSIONS = ("4.9.8", "5.3.3")


def pytest_report_header(config):
    return isolation.pytest_report_header(config)


@pytest.fixture(scope="session")
def java_built() -> None:
    jvm.ensure_built()


@pytest.fixture(scope="session")
def network():
    net = isolation.HostNetwork()
    yield net
    net.close()


@pytest.fixture(scope="module")
def client_host(network):
    host = network.new_client_host()
    yield host
    host.close()


@pytest.fixture(scope="module")
def ahead(env):
    """Scenarios of a module's later tests on its ``env`` started ahead (grpcpy.Ahead), joined before
    ``env`` closes (test_grpc_python, test_proxy_grpc_python)."""
    with grpcpy.Ahead() as a:
        yield a
