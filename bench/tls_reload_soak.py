"""Soak: 1,000 certificate reloads of a TLS server port; prints memory growth (goal < 5 MiB).

Not a timed test. Two certificate/key pairs are written alternately (atomic replace) and
the watcher's check runs on an injected clock, so every round is one real reload: files
read, key and certificate parsed and matched, a new SSL context built and swapped in.
Every ``--connect-every`` rounds a TLS client connects over loopback and checks that it
sees the certificate just loaded (then disconnects), so retired contexts must be freed.

    python bench/tls_reload_soak.py [--reloads 1000] [--connect-every 50]
"""
from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from twisted.internet import defer, task  # noqa: E402
from twisted.internet.selectreactor import SelectReactor  # noqa: E402

from rmqpy.protocol.command import RemotingCommand  # noqa: E402
from rmqpy.remoting import tls  # noqa: E402
from rmqpy.remoting.client import RemotingClient  # noqa: E402
from rmqpy.remoting.dispatch import RequestDispatcher  # noqa: E402
from rmqpy.remoting.protocol import RemotingServerFactory  # noqa: E402
from rmqpy.remoting.tls_testcerts import issue, make_ca  # noqa: E402


def rss_kib() -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class Pong:
    def process_request(self, channel, request):
        return request.response(remark="pong")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reloads", type=int, default=1000)
    ap.add_argument("--connect-every", type=int, default=50)
    args = ap.parse_args()

    d = Path(tempfile.mkdtemp(prefix="tls-soak-"))
    ca = make_ca()
    (d / "ca.pem").write_bytes(ca.cert_pem)
    pairs = [issue(ca, f"server {i}", fresh_key=True) for i in range(2)]
    pems = [(p.cert_pem, p.key_pem("pw")) for p in pairs]
    cert, key = d / "server.pem", d / "server.key"
    cert.write_bytes(pems[0][0])
    key.write_bytes(pems[0][1])

    r = SelectReactor()
    clock = task.Clock()
    dispatcher = RequestDispatcher()
    dispatcher.register(1, Pong())
    wrapper = tls.server_factory_wrapper(
        {"tls.server.mode": "enforcing", "tls.server.certPath": str(cert), "tls.server.keyPath": str(key),
         "tls.server.keyPassword": "pw", "tls.config.file": str(d / "none")},
        reactor=r, clock=clock, use_inotify=False)
    port = r.listenTCP(0, wrapper(RemotingServerFactory(dispatcher, r)), interface="127.0.0.1")
    addr = f"127.0.0.1:{port.getHost().port}"
    client_props = {"tls.enable": "true", "tls.client.trustCertPath": str(d / "ca.pem"),
                    "tls.config.file": str(d / "none")}
    endpoints = tls.client_endpoint_factory(client_props, reactor=r, use_inotify=False)
    result: dict[str, object] = {}

    def replace(path: Path, data: bytes) -> None:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    async def connect_and_check(expect: str) -> None:
        client = RemotingClient(r, endpoint_factory=endpoints)
        resp = await client.invoke(addr, RemotingCommand.request(1), 5)
        assert resp.remark == "pong"
        proto = await client.connection(addr)
        seen = proto.transport.getHandle().get_peer_certificate()
        seen = seen.to_cryptography() if hasattr(seen, "to_cryptography") else seen
        assert tls.fingerprint(seen) == expect, "a new connection saw an old certificate"
        client.close()
        await task.deferLater(r, 0.01, lambda: None)

    async def soak() -> None:
        wrapper.holder.start()
        await connect_and_check(pairs[0].fingerprint)
        for _ in range(20):  # warm-up: allocator and caches settle before the baseline
            i = (wrapper.holder.reloads + 1) % 2
            replace(key, pems[i][1])
            replace(cert, pems[i][0])
            clock.advance(tls.POLL_INTERVAL)
        gc.collect()
        base, t0, start_reloads = rss_kib(), time.monotonic(), wrapper.holder.reloads
        print(f"baseline RSS {base / 1024:.1f} MiB after {start_reloads} warm-up reloads", flush=True)
        for n in range(1, args.reloads + 1):
            i = (wrapper.holder.reloads + 1) % 2
            replace(key, pems[i][1])
            replace(cert, pems[i][0])
            clock.advance(tls.POLL_INTERVAL)
            assert wrapper.holder.fingerprint == pairs[i].fingerprint, f"reload {n} did not swap"
            if args.connect_every and n % args.connect_every == 0:
                await connect_and_check(pairs[i].fingerprint)
            if n % 200 == 0:
                gc.collect()
                print(f"{n:5d} reloads  RSS {rss_kib() / 1024:7.1f} MiB  (+{(rss_kib() - base) / 1024:.2f})",
                      flush=True)
        gc.collect()
        growth = (rss_kib() - base) / 1024
        done = wrapper.holder.reloads - start_reloads
        print(f"{done} reloads in {time.monotonic() - t0:.1f}s, failures {wrapper.holder.failures}, "
              f"memory growth {growth:.2f} MiB (goal < 5 MiB): {'OK' if growth < 5 else 'OVER'}")
        result["ok"] = growth < 5 and done == args.reloads and wrapper.holder.failures == 0
        wrapper.holder.stop()
        await port.stopListening()

    def go() -> None:
        d_ = defer.ensureDeferred(soak())
        d_.addErrback(lambda f: (print(f.getTraceback(), file=sys.stderr), result.setdefault("ok", False)))
        d_.addBoth(lambda _: r.stop())

    r.callWhenRunning(go)
    r.run(installSignalHandlers=False)
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    raise SystemExit(main())
