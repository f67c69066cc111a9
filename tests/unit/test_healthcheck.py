"""rmqpy-healthcheck: finding the server of a container from its command line, and the probe."""
from __future__ import annotations

import os
import socket
import struct
import threading
from pathlib import Path

from rmqpy.protocol import command as codec
from rmqpy.protocol.codes import RequestCode
from rmqpy.tools import healthcheck
from rmqpy.tools.healthcheck import Server, listen_address, running_servers, tap_args


def test_tap_args_of_console_scripts_and_twistd() -> None:
    assert tap_args(["/opt/rmqpy/bin/python3", "/opt/rmqpy/bin/mqbroker", "-c", "b.conf"]) == \
        ("rmq-broker", ["-c", "b.conf"])
    assert tap_args(["twistd", "-n", "--pidfile=", "rmq-namesrv", "-D", "listenPort=1"]) == \
        ("rmq-namesrv", ["-D", "listenPort=1"])
    assert tap_args(["/usr/bin/python3", "-m", "pytest"]) is None


def test_listen_address_as_the_tap_reads_it(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=20911\nbindAddress=10.1.2.3\n")
    assert listen_address("rmq-broker", ["-c", str(conf)]) == ("10.1.2.3", 20911)
    assert listen_address("rmq-broker", ["-c", str(conf), "-D", "listenPort=30911", "-D", "bindAddress=0.0.0.0"]) \
        == ("127.0.0.1", 30911)
    assert listen_address("rmq-namesrv", []) == ("127.0.0.1", 9876)
    assert listen_address("rmq-namesrv", ["-D", "listenPort=19876"]) == ("127.0.0.1", 19876)


def test_running_servers_reads_relative_configs_in_the_servers_cwd(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    work = tmp_path / "work"
    work.mkdir()
    (work / "ns.conf").write_text("listenPort=29876\n")
    for pid, argv in ((7, ["python3", "/venv/bin/mqnamesrv", "-c", "ns.conf"]),
                      (9, ["python3", "/venv/bin/mqbroker", "-D", "listenPort=21911"]),
                      (11, ["sleep", "100"])):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
        os.symlink(work, proc / str(pid) / "cwd")
    here = os.getcwd()
    found = list(running_servers(str(proc)))
    assert os.getcwd() == here
    assert found == [Server("rmq-namesrv", "127.0.0.1", 29876, 7), Server("rmq-broker", "127.0.0.1", 21911, 9)]


def _answering_server() -> tuple[socket.socket, int, list[int]]:
    """A socket that answers one remoting request with a response of the same opaque."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    codes: list[int] = []

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            (length,) = struct.unpack(">I", conn.recv(4))
            data = b""
            while len(data) < length:
                data += conn.recv(length - len(data))
            request = codec.decode(data)
            codes.append(request.code)
            conn.sendall(codec.encode(request.response(remark="ok")))

    threading.Thread(target=serve, daemon=True).start()
    return srv, srv.getsockname()[1], codes


def test_main_probes_with_a_request_and_fails_where_nothing_answers(capsys) -> None:
    srv, port, codes = _answering_server()
    with srv:
        assert healthcheck.main([f"127.0.0.1:{port}", "--broker"]) == 0
    assert codes == [RequestCode.GET_BROKER_RUNTIME_INFO]
    assert f"broker 127.0.0.1:{port} answers" in capsys.readouterr().out
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    assert healthcheck.main([f"127.0.0.1:{free}"]) == 1
    assert f"name server 127.0.0.1:{free}:" in capsys.readouterr().err
