"""A Spark standalone cluster for tests: a master and workers, each its own JVM process started from the
pyspark installation (``bin/spark-class org.apache.spark.deploy.master.Master`` / ``worker.Worker``),
and a driver session submitting to it from this process.

Executors run on the workers; they find rmqpy and rmqpy_spark through ``spark.executorEnv.PYTHONPATH``
and run this interpreter (``spark.pyspark.python``).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.interop.servers import free_port, wait_port

ROOT = Path(__file__).resolve().parents[2]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class StandaloneCluster:
    """``workers`` workers of ``cores`` cores and ``memory`` each, all bound to ``host``."""

    def __init__(self, workdir: Path, host: str = "127.0.0.1", workers: int = 2, cores: int = 1,
                 memory: str = "640m") -> None:
        self.workdir, self.host = workdir, host
        workdir.mkdir(parents=True, exist_ok=True)
        home = spark_home()
        self.env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP=host, SPARK_LOG_DIR=str(workdir / "logs"),
                        SPARK_DAEMON_MEMORY="256m", PYSPARK_PYTHON=sys.executable,
                        SPARK_NO_DAEMONIZE="1")
        self.env.pop("SPARK_CONF_DIR", None)
        self.spark_class = str(home / "bin" / "spark-class")
        self.procs: list[tuple[subprocess.Popen, Path]] = []
        try:
            self.port = free_port()
            self._start("master", ["org.apache.spark.deploy.master.Master", "--host", host, "--port", str(self.port),
                                   "--webui-port", str(free_port())])
            wait_port(host, self.port, 60, self.procs[0][0], self.procs[0][1])
            self._wait_log(self.procs[0][1], "I have been elected leader", 1, self.procs[0][0])
            for i in range(workers):
                wd = workdir / f"worker{i}"
                wd.mkdir(exist_ok=True)
                self._start(f"worker{i}", ["org.apache.spark.deploy.worker.Worker", "--host", host,
                                           "--webui-port", str(free_port()), "--cores", str(cores), "--memory", memory,
                                           "--work-dir", str(wd), self.url])
            # the master logs each worker it accepts
            self._wait_log(self.procs[0][1], "Registering worker", workers, self.procs[0][0])
        except BaseException:
            self.close()
            raise

    @property
    def url(self) -> str:
        return f"spark://{self.host}:{self.port}"

    def _start(self, name: str, args: list[str]) -> None:
        log = self.workdir / f"{name}.log"
        with open(log, "ab") as out:
            p = subprocess.Popen([self.spark_class, *args], env=self.env, cwd=str(self.workdir), stdout=out,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs.append((p, log))

    @staticmethod
    def _wait_log(log: Path, text: str, times: int, proc: subprocess.Popen, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while log.read_text(errors="replace").count(text) < times:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{log.name}: {text!r} not logged {times} time(s) (exit {proc.poll()}):\n"
                                   f"{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)

    def session(self, app: str = "rmqpy-spark-cluster-test"):
        """A SparkSession of this cluster (two executors of one core each) with ``rocketmq`` registered."""
        from pyspark.sql import SparkSession

        path = os.pathsep.join([str(ROOT), str(ROOT / "spark")])
        s = (SparkSession.builder.master(self.url).appName(app)
             .config("spark.driver.host", self.host).config("spark.driver.bindAddress", self.host)
             .config("spark.driver.memory", "768m")
             .config("spark.executor.memory", "512m").config("spark.executor.cores", "1")
             .config("spark.cores.max", str(len(self.procs) - 1))
             .config("spark.executorEnv.PYTHONPATH", path).config("spark.pyspark.python", sys.executable)
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
        s.sparkContext.setLogLevel("ERROR")
        from rmqpy_spark import register

        register(s)
        return s

    def close(self) -> None:
        for p, _log in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p, _log in reversed(self.procs):
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)

    def __enter__(self) -> "StandaloneCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
