"""``rmqpy-healthcheck``: exit 0 when a name server or broker answers a request, else 1.

The container image's ``HEALTHCHECK`` (container/Containerfile). One image runs both servers, each
with whatever ``-c``/``-D`` flags the user gave, so without an address the check finds the server
running in its container (a process whose command line is ``mqnamesrv``, ``mqbroker`` or ``twistd
... rmq-namesrv|rmq-broker``) and reads that process's port the way the tap does: its own options
parser and config loading, in its working directory. An explicit ``host:port`` skips the search.

The probe is a real request on the remoting port, not a TCP connect: GET_NAMESRV_CONFIG on a name
server, GET_BROKER_RUNTIME_INFO on a broker. Any answer counts (with ``aclEnable`` an unsigned
request is refused, and the refusal still proves that the port, the decoder and the processors run);
no answer within ``--timeout`` seconds, or a closed connection, is unhealthy.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from typing import Iterator

from rmqpy.protocol.codes import RequestCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.tools.blocking_client import BlockingClient

#: the command names a running server has on its command line, and its tap
_PROGRAMS = {"mqnamesrv": "rmq-namesrv", "mqbroker": "rmq-broker", "rmq-namesrv": "rmq-namesrv",
             "rmq-broker": "rmq-broker"}
_PROBES = {"rmq-namesrv": RequestCode.GET_NAMESRV_CONFIG, "rmq-broker": RequestCode.GET_BROKER_RUNTIME_INFO}


@dataclass
class Server:
    tap: str
    host: str
    port: int
    pid: int = 0


def tap_args(argv: list[str]) -> tuple[str, list[str]] | None:
    """The tap and its options in a command line: ``mqbroker -c x`` (the console script, run by
    its interpreter) or ``twistd -n --pidfile= rmq-broker -c x``."""
    for i, word in enumerate(argv):
        tap = _PROGRAMS.get(os.path.basename(word))
        if tap is not None:
            return tap, argv[i + 1:]
    return None


def listen_address(tap: str, args: list[str]) -> tuple[str, int]:
    """(host to probe, listenPort) as the tap would configure itself from ``args`` (in the cwd)."""
    if tap == "rmq-namesrv":
        from rmqpy.namesrv import tap as namesrv_tap
        ns_options = namesrv_tap.Options()
        ns_options.parseOptions(args)
        _, netty = namesrv_tap.build_configs(ns_options)
        bind, port = netty.bindAddress, netty.listenPort
    else:
        from rmqpy.broker import tap as broker_tap
        from rmqpy.broker.config import load_settings
        br_options = broker_tap.Options()
        br_options.parseOptions(args)
        settings = load_settings(br_options["configFile"], br_options["namesrvAddr"], defines=br_options["defines"],
                                 warn=lambda _m: None)
        bind, port = settings.netty.bindAddress, settings.netty.listenPort
    return ("127.0.0.1" if bind in ("", "0.0.0.0", "::") else bind), port


def running_servers(proc: str = "/proc") -> Iterator[Server]:
    """The name servers and brokers among this (container's) processes, oldest first."""
    pids = sorted(int(p) for p in os.listdir(proc) if p.isdigit())
    for pid in pids:
        try:
            with open(f"{proc}/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
            cwd = os.readlink(f"{proc}/{pid}/cwd")
        except OSError:
            continue  # gone, or not ours to read
        found = tap_args(argv)
        if found is None or pid == os.getpid():
            continue
        tap, args = found
        here = os.getcwd()
        try:
            os.chdir(cwd)  # a relative -c is relative to the server's working directory
            host, port = listen_address(tap, args)
        except (SystemExit, Exception) as exc:  # noqa: BLE001 - a command line we cannot read is reported
            print(f"rmqpy-healthcheck: cannot read the options of pid {pid} ({' '.join(argv)}): {exc}",
                  file=sys.stderr)
            continue
        finally:
            os.chdir(here)
        yield Server(tap, host, port, pid)


def probe(server: Server, timeout: float) -> str | None:
    """None when the server answered; else why not."""
    try:
        with BlockingClient(f"{server.host}:{server.port}", timeout=timeout) as client:
            response = client.invoke(RemotingCommand.request(_PROBES[server.tap]))
    except (OSError, ConnectionError, ValueError) as exc:
        return f"{server.host}:{server.port}: {exc}"
    return None if response.is_response else f"{server.host}:{server.port}: no answer"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rmqpy-healthcheck", description=__doc__.splitlines()[0])
    parser.add_argument("address", nargs="?", help="host:port of the server (default: the one running here)")
    parser.add_argument("--broker", action="store_true", help="the address is a broker's (default: a name server's)")
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds to wait for the answer (3)")
    args = parser.parse_args(argv)
    if args.address:
        host, _, port = args.address.rpartition(":")
        if not host or not port.isdigit():
            parser.error(f"{args.address!r} is not host:port")
        servers = [Server("rmq-broker" if args.broker else "rmq-namesrv", host, int(port))]
    else:
        servers = list(running_servers())
        if not servers:
            print("rmqpy-healthcheck: no mqnamesrv or mqbroker runs here", file=sys.stderr)
            return 1
    failed = False
    for server in servers:
        problem = probe(server, args.timeout)
        name = "name server" if server.tap == "rmq-namesrv" else "broker"
        if problem is None:
            print(f"{name} {server.host}:{server.port} answers")
        else:
            print(f"rmqpy-healthcheck: {name} {problem}", file=sys.stderr)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
