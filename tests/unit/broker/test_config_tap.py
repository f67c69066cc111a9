import pytest

from rmqpy.broker import tap
from rmqpy.broker.config import load_settings
from rmqpy.common.properties import PropertiesError


def test_defaults_and_file(tmp_path):
    conf = tmp_path / "b.conf"
    conf.write_text("brokerName=broker-x\nlistenPort=20911\nnamesrvAddr=1.1.1.1:9876;2.2.2.2:9876\n"
                    "enablePropertyFilter=true\nflushDiskType=SYNC_FLUSH\nstorePathRootDir=/tmp/s\nwhatever=1\n")
    warnings = []
    s = load_settings(str(conf), warn=warnings.append)
    assert s.broker.brokerName == "broker-x" and s.netty.listenPort == 20911
    assert s.broker.namesrv_addrs == ["1.1.1.1:9876", "2.2.2.2:9876"]
    assert s.broker.enablePropertyFilter and s.store.flushDiskType == "SYNC_FLUSH"
    assert s.store.haListenPort == 20912 and s.store.storePathRootDir == "/tmp/s"
    assert warnings == ["unknown config key 'whatever' ignored"]
    s = load_settings(str(conf), "9.9.9.9:9876")
    assert s.broker.namesrv_addrs == ["9.9.9.9:9876"]
    d = load_settings()
    assert (d.broker.brokerClusterName, d.broker.defaultTopicQueueNums, d.broker.registerNameServerPeriod,
            d.netty.listenPort, d.broker.autoCreateTopicEnable) == ("DefaultCluster", 8, 30000, 10911, True)


def test_bad_values_name_file_and_key(tmp_path):
    conf = tmp_path / "b.conf"
    conf.write_text("listenPort=abc\n")
    with pytest.raises(PropertiesError, match="b.conf: listenPort='abc'"):
        load_settings(str(conf))
    conf.write_text("namesrvAddr=nohostport\n")
    with pytest.raises(PropertiesError, match="namesrvAddr"):
        load_settings(str(conf))
    with pytest.raises(PropertiesError):
        load_settings(str(tmp_path / "missing.conf"))


def test_print_options_exit(tmp_path, capsys):
    conf = tmp_path / "b.conf"
    conf.write_text("brokerName=broker-p\n")
    for flag, must, must_not in (("-p", "serverWorkerThreads=", None), ("-m", "brokerName=broker-p", "highSpeedMode")):
        opts = tap.Options()
        opts.parseOptions(["-c", str(conf), flag])
        with pytest.raises(SystemExit) as exc:
            tap.makeService(opts)
        assert exc.value.code == 0
        out = capsys.readouterr().out
        assert must in out and "brokerName=broker-p" in out
        if must_not:
            assert must_not not in out


def test_make_service_listens_on_its_ports(tmp_path):
    """The main port, the fast port (listenPort - 2) and the HA port (listenPort + 1)."""
    from twisted.internet import task
    conf = tmp_path / "b.conf"
    conf.write_text(f"storePathRootDir={tmp_path}/store\nlistenPort=20911\nmappedFileSizeCommitLog=1048576\n"
                    "namesrvAddr=\n")
    opts = tap.Options()
    opts.parseOptions(["-c", str(conf)])
    svc = tap.makeService(opts, reactor=task.Clock())
    from twisted.application.internet import StreamServerEndpointService
    ports = [s.endpoint._port for s in svc if isinstance(s, StreamServerEndpointService)]
    assert sorted(ports) == [20909, 20911, 20912]
    svc.controller.message_store.shutdown()


def test_ha_port_listens_on_ha_listen_address(tmp_path):
    """haListenAddress (rmqpy, issue 31) puts the HA port alone on one address; the others keep bindAddress."""
    from twisted.application.internet import StreamServerEndpointService
    from twisted.internet import task
    conf = tmp_path / "b.conf"
    conf.write_text(f"storePathRootDir={tmp_path}/store\nlistenPort=20911\nmappedFileSizeCommitLog=1048576\n"
                    "namesrvAddr=\nhaListenAddress=127.0.0.1\nhaAllowedReplicaAddresses=10.0.0.0/8\n")
    opts = tap.Options()
    opts.parseOptions(["-c", str(conf)])
    svc = tap.makeService(opts, reactor=task.Clock())
    where = {s.endpoint._port: s.endpoint._interface for s in svc if isinstance(s, StreamServerEndpointService)}
    assert where == {20909: "0.0.0.0", 20911: "0.0.0.0", 20912: "127.0.0.1"}
    assert [str(n) for n in svc.controller.replication.service.gate.allowed] == ["10.0.0.0/8"]
    svc.controller.message_store.shutdown()


def test_ha_use_tls_wraps_the_ha_port_and_the_slaves_dial(tmp_path):
    """haUseTLS=true (rmqpy): the HA port is TLS only behind the allow-list, a slave dials with TLS;
    keys that cannot work stop the start."""
    from twisted.application.internet import StreamServerEndpointService
    from twisted.internet import task

    from rmqpy.store.ha.gate import GatedFactory
    conf = tmp_path / "b.conf"
    base = (f"storePathRootDir={tmp_path}/store\nlistenPort=20911\nmappedFileSizeCommitLog=1048576\nnamesrvAddr=\n"
            "tls.config.file=/nonexistent/tls.properties\nhaUseTLS=true\n")
    conf.write_text(base + "brokerRole=SLAVE\nbrokerId=1\nhaMasterAddress=127.0.0.1:30912\n")
    opts = tap.Options()
    opts.parseOptions(["-c", str(conf)])
    svc = tap.makeService(opts, reactor=task.Clock())
    ha = [s.factory for s in svc if isinstance(s, StreamServerEndpointService) and s.endpoint._port == 20912]
    assert len(ha) == 1 and isinstance(ha[0], GatedFactory)
    assert svc.controller.replication.client._connect == svc.controller.ha_connect is not None
    svc.controller.message_store.shutdown()
    conf.write_text(base + "tls.test.mode.enable=false\n")
    opts = tap.Options()
    opts.parseOptions(["-c", str(conf)])
    with pytest.raises(SystemExit, match="haUseTLS: tls.server.mode=enforcing needs"):
        tap.makeService(opts, reactor=task.Clock())
