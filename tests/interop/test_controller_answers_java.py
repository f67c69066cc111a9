"""Issue 32: rmqpy's controller answers the controller request codes as Apache's 5.3.3 controller does,
side by side, request for request.

Apache's name server with its controller embedded (one DLedger peer) and one rmqpy controller (one
PySyncObj peer; ``mqcontroller`` on its own, or in rmqpy's name server with
``enableControllerInNamesrv=true``) get the same raw remoting requests, on an empty state and then along one broker
set's life (apply id, register, elect, alter the SyncStateSet, the admin's election, clean): each
answer's code, remark, header fields and body (fastjson text, byte for byte) must be the same, but
for the controller's own address, which is masked.
"""
from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from rmqpy.protocol.codes import RequestCode
from tests.interop import jvm, servers
from tests.interop.waiting import wait_until

pytestmark = pytest.mark.interop

JAVA = "5.3.3"
C, N = "CmpCluster", "broker-cmp"


def start_rmqpy_controller(tmp: Path, where: str) -> tuple[servers.ServerProcess, str]:
    port, raft = servers.free_port(), servers.free_port()
    keys = {"controllerDLegerGroup": "ctl", "controllerDLegerPeers": f"n0-127.0.0.1:{port}",
            "controllerDLegerSelfId": "n0", "controllerRaftPeers": f"n0-127.0.0.1:{raft}",
            "controllerStorePath": tmp / "store"}
    if where == "namesrv":  # rmqpy's name server with the controller in its process, as Apache's here
        proc = servers.start_namesrv(tmp, props={"enableControllerInNamesrv": True, **keys})
        servers.wait_port("127.0.0.1", port, 20, proc.proc, proc.log)
    else:
        conf = servers.write_conf(tmp / "controller.conf", keys)
        proc = servers.ServerProcess("rmq-controller", ["-c", str(conf)], tmp, port).start()
    return proc, f"127.0.0.1:{port}"


class Connection:
    """One kept connection, as a broker keeps its channel: a controller forgets a broker whose
    heartbeat channel closed (Java ``onBrokerChannelClose``)."""

    def __init__(self, addr: str) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=5)

    def heartbeat(self, ext: dict) -> int:
        header = {"code": RequestCode.BROKER_HEARTBEAT, "flag": 0, "language": "JAVA", "opaque": 7,
                  "serializeTypeCurrentRPC": "JSON", "version": jvm.REMOTING_VERSION,
                  "extFields": {k: str(v) for k, v in ext.items()}}
        hb = json.dumps(header).encode()
        self.sock.sendall((4 + len(hb)).to_bytes(4, "big") + len(hb).to_bytes(4, "big") + hb)
        length = int.from_bytes(self._read(4), "big")
        data = self._read(length)
        hlen = int.from_bytes(data[:4], "big") & 0xFFFFFF
        return int(json.loads(data[4:4 + hlen])["code"])

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()


def ask(addr: str, code: int, ext: dict | None = None, body: bytes = b"") -> tuple:
    got_code, remark, fields, answer = jvm.remoting_request(addr, code, ext, body)
    fields = {k: v for k, v in fields.items() if k != "invokeTime"}
    return got_code, remark, fields, answer.decode("utf-8", "replace")  # fastjson text, byte for byte


def masked(value: object, addr: str) -> object:
    text = json.dumps(value, sort_keys=True)
    return json.loads(text.replace(addr, "<controller>"))


@pytest.mark.parametrize("where", ["standalone", "namesrv"])
def test_controller_answers_are_apaches(java_built, tmp_path: Path, where: str):
    ns, _ns_addr, java_ctl = jvm.start_java_namesrv_with_controller(JAVA, tmp_path / "ns", "127.0.0.1")
    py, py_ctl = start_rmqpy_controller(tmp_path / "py", where)
    try:
        wait_until(lambda: ask(py_ctl, RequestCode.CONTROLLER_GET_METADATA_INFO)[2].get("isLeader") == "true", 20,
                   what="the rmqpy controller leading", diag=lambda: py.log_tail(2000))
        broker = {1: "127.0.0.1:30911", 2: "127.0.0.1:30912"}
        steps: list[tuple[str, int, dict | None, bytes]] = [
            ("metadata", RequestCode.CONTROLLER_GET_METADATA_INFO, None, b""),
            ("replica info, no set", RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": N}, b""),
            ("next id, no set", RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, {"clusterName": C, "brokerName": N}, b""),
            ("apply id 2 first", RequestCode.CONTROLLER_APPLY_BROKER_ID,
             {"clusterName": C, "brokerName": N, "appliedBrokerId": 2, "registerCheckCode": f"{broker[2]};1"}, b""),
            ("register, no set", RequestCode.CONTROLLER_REGISTER_BROKER,
             {"clusterName": C, "brokerName": N, "brokerId": 1, "brokerAddress": broker[1]}, b""),
            ("elect, no set", RequestCode.CONTROLLER_ELECT_MASTER,
             {"clusterName": C, "brokerName": N, "brokerId": 1, "designateElect": "false"}, b""),
            ("sync state, no body", RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, None, b""),
            ("heartbeat without a broker id", RequestCode.BROKER_HEARTBEAT,
             {"clusterName": C, "brokerName": N, "brokerAddr": broker[1]}, b""),
            ("apply id 1", RequestCode.CONTROLLER_APPLY_BROKER_ID,
             {"clusterName": C, "brokerName": N, "appliedBrokerId": 1, "registerCheckCode": f"{broker[1]};1"}, b""),
            ("apply id 1 again, other code", RequestCode.CONTROLLER_APPLY_BROKER_ID,
             {"clusterName": C, "brokerName": N, "appliedBrokerId": 1, "registerCheckCode": f"{broker[2]};2"}, b""),
            ("next id", RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, {"clusterName": C, "brokerName": N}, b""),
            ("register 1", RequestCode.CONTROLLER_REGISTER_BROKER,
             {"clusterName": C, "brokerName": N, "brokerId": 1, "brokerAddress": broker[1]}, b""),
            ("elect 1", RequestCode.CONTROLLER_ELECT_MASTER,
             {"clusterName": C, "brokerName": N, "brokerId": 1, "designateElect": "false"}, b""),
            ("apply id 2", RequestCode.CONTROLLER_APPLY_BROKER_ID,
             {"clusterName": C, "brokerName": N, "appliedBrokerId": 2, "registerCheckCode": f"{broker[2]};1"}, b""),
            ("register 2", RequestCode.CONTROLLER_REGISTER_BROKER,
             {"clusterName": C, "brokerName": N, "brokerId": 2, "brokerAddress": broker[2]}, b""),
            ("elect 2, master alive", RequestCode.CONTROLLER_ELECT_MASTER,
             {"clusterName": C, "brokerName": N, "brokerId": 2, "designateElect": "false"}, b""),
            ("alter, stale epoch", RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
             {"brokerName": N, "masterBrokerId": 1, "masterEpoch": 1},
             b'{"syncStateSet":[1,2],"syncStateSetEpoch":0}'),
            ("alter, wrong master", RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
             {"brokerName": N, "masterBrokerId": 2, "masterEpoch": 1},
             b'{"syncStateSet":[1,2],"syncStateSetEpoch":1}'),
            ("alter", RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
             {"brokerName": N, "masterBrokerId": 1, "masterEpoch": 1},
             b'{"syncStateSet":[1,2],"syncStateSetEpoch":1}'),
            ("replica info", RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": N}, b""),
            ("sync state", RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, None, json.dumps([N, "nope"]).encode()),
            ("admin elects 2", RequestCode.CONTROLLER_ELECT_MASTER,
             {"clusterName": C, "brokerName": N, "brokerId": 2, "designateElect": "true"}, b""),
            ("admin elects 9", RequestCode.CONTROLLER_ELECT_MASTER,
             {"clusterName": C, "brokerName": N, "brokerId": 9, "designateElect": "true"}, b""),
            ("clean a live set", RequestCode.CLEAN_BROKER_DATA, {"clusterName": C, "brokerName": N}, b""),
            ("clean a live id", RequestCode.CLEAN_BROKER_DATA,
             {"clusterName": C, "brokerName": N, "brokerControllerIdsToClean": "1"}, b""),
            ("clean, bad ids", RequestCode.CLEAN_BROKER_DATA,
             {"clusterName": C, "brokerName": N, "brokerControllerIdsToClean": "x"}, b""),
            ("clean, living too", RequestCode.CLEAN_BROKER_DATA,
             {"clusterName": C, "brokerName": N, "isCleanLivingBroker": "true"}, b""),
            ("replica info, cleaned", RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": N}, b""),
        ]
        # both brokers beat on kept connections, to each controller, from here on
        kept = []
        for ctl in (java_ctl, py_ctl):
            for broker_id, addr in broker.items():
                conn = Connection(ctl)
                kept.append(conn)
                assert conn.heartbeat({"clusterName": C, "brokerName": N, "brokerAddr": addr, "brokerId": broker_id,
                                       "epoch": 0, "maxOffset": 0, "confirmOffset": 0,
                                       "heartbeatTimeoutMills": 600000, "electionPriority": 0}) == 0
        differences, java_codes = [], {}
        for what, code, ext, body in steps:
            java = masked(ask(java_ctl, code, ext, body), java_ctl)
            java_codes[what] = java[0]
            mine = masked(ask(py_ctl, code, ext, body), py_ctl)
            if what == "sync state, no body" or what == "clean, bad ids":
                java, mine = list(java), list(mine)
                # Java's text of an exception differs in its class name only: compare codes and fields
                java[1] = mine[1] = None
            if java != mine:
                differences.append(f"{what}:\n  java  {java}\n  rmqpy {mine}")
        assert not differences, "\n".join(differences)
        # the set's life went as planned on Apache's side too (not two equal refusals)
        assert [java_codes[w] for w in ("apply id 1", "register 1", "elect 1", "alter", "admin elects 2",
                                        "clean, living too")] == [0] * 6, java_codes
        assert java_codes["elect 2, master alive"] == 2011 and java_codes["clean a live id"] == 2009, java_codes
        for conn in kept:
            conn.close()
    finally:
        py.kill9()
        ns.kill9()
