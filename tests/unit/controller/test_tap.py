"""``twistd rmq-controller`` / ``mqcontroller``: Java's ControllerConfig keys, the ones rmqpy does not
use reported, the peers parsed and mapped onto PySyncObj's ports."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmqpy.controller.config import ControllerConfig, parse_peers, raft_peers
from rmqpy.controller.tap import Options, build_configs

ROOT = Path(__file__).resolve().parents[3]


def test_peers_and_raft_ports():
    peers = parse_peers("n0-127.0.0.1:9878;n1-127.0.0.1:9868; n2-127.0.0.1:9858;")
    assert peers == {"n0": "127.0.0.1:9878", "n1": "127.0.0.1:9868", "n2": "127.0.0.1:9858"}
    assert raft_peers(ControllerConfig(), peers)["n1"] == "127.0.0.1:19868"
    explicit = ControllerConfig(controllerRaftPeers="n0-h:1;n1-h:2;n2-h:3")
    assert raft_peers(explicit, peers) == {"n0": "h:1", "n1": "h:2", "n2": "h:3"}
    with pytest.raises(ValueError):
        parse_peers("127.0.0.1:9878")
    with pytest.raises(ValueError):
        raft_peers(ControllerConfig(controllerRaftPortOffset=60000), peers)


def test_config_file_keys_and_the_ones_not_applied(tmp_path, capsys):
    conf = tmp_path / "controller.conf"
    conf.write_text("controllerDLegerGroup=group1\ncontrollerDLegerPeers=n0-127.0.0.1:9878\n"
                    "controllerDLegerSelfId=n0\ncontrollerStorePath=/tmp/x\nscanNotActiveBrokerInterval=1000\n"
                    "notifyBrokerRoleChanged=false\nenableElectUncleanMaster=true\nmappedFileSize=1024\n"
                    "jRaftGroupId=g\nnoSuchKey=1\nlistenPort=9999\n")
    options = Options()
    options.parseOptions(["-c", str(conf)])
    config, _ = build_configs(options)
    assert (config.controllerDLegerGroup, config.scanNotActiveBrokerInterval, config.notifyBrokerRoleChanged,
            config.enableElectUncleanMaster) == ("group1", 1000, False, True)
    err = capsys.readouterr().err
    assert "'mappedFileSize' is not used: PySyncObj keeps its own journal file" in err
    assert "'jRaftGroupId' is not used" in err
    assert "unknown config key 'noSuchKey' ignored" in err
    assert "'listenPort' is not used: a controller listens on its own controllerDLegerPeers address" in err


def test_mqcontroller_is_the_tap(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(tmp_path))
    code = "import sys; from rmqpy.cli import mqcontroller; mqcontroller(sys.argv[1:])"
    run = subprocess.run([sys.executable, "-c", code, "-m", "-D", "controllerDLegerSelfId=n7"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "controllerDLegerSelfId=n7" in run.stdout, run


def test_name_server_runs_the_controller_with_enable_controller_in_namesrv(tmp_path):
    from rmqpy.controller.service import ControllerService
    from rmqpy.namesrv import tap as namesrv_tap
    conf = tmp_path / "namesrv.conf"
    conf.write_text("listenPort=0\nenableControllerInNamesrv=true\ncontrollerDLegerGroup=g\n"
                    "controllerDLegerPeers=n0-127.0.0.1:0\ncontrollerDLegerSelfId=n0\n"
                    f"controllerStorePath={tmp_path / 'ctl'}\nkvConfigPath={tmp_path / 'kv.json'}\n")
    options = namesrv_tap.Options()
    options.parseOptions(["-c", str(conf)])
    top = namesrv_tap.makeService(options)
    assert isinstance(top.embedded_controller, ControllerService)
    assert top.embedded_controller.self_id == "n0" and top.embedded_controller.config.controllerDLegerGroup == "g"
    options = namesrv_tap.Options()
    conf.write_text("listenPort=0\ncontrollerDLegerPeers=n0-127.0.0.1:0\n")
    options.parseOptions(["-c", str(conf)])
    assert not hasattr(namesrv_tap.makeService(options), "embedded_controller")  # keys read, no controller
