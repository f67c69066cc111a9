"""tests/ports.py: the ports the suite's servers get are below the ephemeral range, a band per worker."""
import collections
import socket

from tests import ports


def test_each_worker_draws_from_its_own_band_below_the_ephemeral_range():
    env = {"PYTEST_XDIST_WORKER_COUNT": "2"}
    first = ports.band({**env, "PYTEST_XDIST_WORKER": "gw0"})
    second = ports.band({**env, "PYTEST_XDIST_WORKER": "gw1"})
    assert ports.LOW == first[0] < first[1] <= second[0] < second[1] <= ports.ephemeral_low()
    assert ports.band({}) == (ports.LOW, max(ports.ephemeral_low(), ports.LOW + 2000))


def test_a_port_is_neither_handed_out_twice_nor_when_taken(monkeypatch):
    monkeypatch.setattr(ports, "_RECENT", collections.deque(maxlen=512))
    monkeypatch.setattr(ports, "band", lambda: (20000, 20006))
    monkeypatch.setattr(ports, "is_free", lambda port: port != 20003)
    assert sorted(ports.free_port() for _ in range(5)) == [20000, 20001, 20002, 20004, 20005]
    # a broker's three ports (fast, main, HA) all inside the band
    monkeypatch.setattr(ports, "band", lambda: (21000, 21010))
    p = ports.free_port((-2, 0, 1))
    assert 21000 <= p - 2 and p + 1 < 21010


def test_is_free_sees_a_bound_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        assert not ports.is_free(s.getsockname()[1])
