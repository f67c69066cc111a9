"""tools/java_config_defaults.py reads a release's config classes from a git ref or from sources jars.

Made-up classes in a throw-away git repository and jar: nothing is fetched.
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "java_config_defaults.py"

BROKER_CONFIG = """package org.apache.rocketmq.common;
public class BrokerConfig extends BrokerIdentity {
    private static final int PROCESSOR_NUMBER = Runtime.getRuntime().availableProcessors();
    // a comment = 1;
    @ImportantField
    private long transactionCheckInterval = 30 * 1000;
    private int sendMessageThreadPoolNums = Math.min(PROCESSOR_NUMBER, 4);
    private String msgTraceTopicName = "RMQ_SYS_TRACE_TOPIC";
    private boolean traceOn;
    public long getTransactionCheckInterval() { return transactionCheckInterval; }
}
"""


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("java_config_defaults", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _jar(path: Path, members: dict[str, str]) -> str:
    with zipfile.ZipFile(path, "w") as z:
        for name, text in members.items():
            z.writestr(name, text)
    return str(path)


EXPECTED = {"transactionCheckInterval": "30000", "sendMessageThreadPoolNums": "=Math.min(PROCESSOR_NUMBER, 4)",
            "msgTraceTopicName": "RMQ_SYS_TRACE_TOPIC", "traceOn": "false"}


def test_sources_jars_by_list_and_by_directory(tool: ModuleType, tmp_path: Path) -> None:
    common = _jar(tmp_path / "rocketmq-common-5.5.1-sources.jar",
                  {"org/apache/rocketmq/common/BrokerConfig.java": BROKER_CONFIG, "META-INF/MANIFEST.MF": ""})
    _jar(tmp_path / "rocketmq-store-5.5.1-sources.jar", {"org/apache/rocketmq/store/Other.java": "class Other {}"})
    by_list = tool.extract({"5.5.1": tool.source_of("-", common)})
    assert by_list["classes"] == {"BrokerConfig": {"5.5.1": EXPECTED}}
    ref = by_list["refs"]["5.5.1"]
    assert ref["version"] == "5.5.1" and list(ref["jars"]) == ["rocketmq-common-5.5.1-sources.jar"]
    assert ref["files"] == {"BrokerConfig": "rocketmq-common-5.5.1-sources.jar!org/apache/rocketmq/common/BrokerConfig.java"}
    # classes the jars do not hold are unknown, not absent from the release
    assert "ProxyConfig" in ref["unknown_classes"] and "BrokerConfig" not in ref["unknown_classes"]

    by_dir = tool.extract({"5.5.1": tool.source_of("-", str(tmp_path))})
    assert by_dir["classes"] == by_list["classes"]
    assert sorted(by_dir["refs"]["5.5.1"]["jars"]) == ["rocketmq-common-5.5.1-sources.jar", "rocketmq-store-5.5.1-sources.jar"]
    by_glob = tool.extract({"5.5.1": tool.source_of("-", str(tmp_path / "rocketmq-*-5.5.1-sources.jar"))})
    assert by_glob["refs"] == by_dir["refs"]


def test_sources_jars_of_two_versions_or_missing_are_refused(tool: ModuleType, tmp_path: Path) -> None:
    a = _jar(tmp_path / "rocketmq-common-5.5.1-sources.jar", {})
    b = _jar(tmp_path / "rocketmq-store-5.3.3-sources.jar", {})
    with pytest.raises(SystemExit, match="several versions"):
        tool.source_of("-", f"{a},{b}")
    with pytest.raises(SystemExit, match="no such sources jar"):
        tool.source_of("-", str(tmp_path / "rocketmq-proxy-5.5.1-sources.jar"))
    with pytest.raises(SystemExit, match="needs GIT_DIR"):
        tool.source_of("-", "rocketmq-all-5.3.3")


def test_git_refs_still_work(tool: ModuleType, tmp_path: Path) -> None:
    repo = tmp_path / "rocketmq"
    src = repo / "common" / "src" / "main" / "java" / "org" / "apache" / "rocketmq" / "common"
    src.mkdir(parents=True)
    (src / "BrokerConfig.java").write_text(BROKER_CONFIG)
    test_copy = repo / "common" / "src" / "test" / "java" / "BrokerConfig.java"
    test_copy.parent.mkdir(parents=True)
    test_copy.write_text("public class BrokerConfig { private int x = 1; }")

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    git("tag", "rocketmq-all-5.3.3")
    result = tool.extract({"5.3.3": tool.source_of(str(repo), "rocketmq-all-5.3.3")})
    assert result["classes"] == {"BrokerConfig": {"5.3.3": EXPECTED}}
    assert result["refs"]["5.3.3"]["ref"] == "rocketmq-all-5.3.3" and len(result["refs"]["5.3.3"]["commit"]) == 40
    assert "unknown_classes" not in result["refs"]["5.3.3"]  # a whole tree: a class not there is not in the release


def test_jdk_and_rocksdb_constants_are_numbers(tool: ModuleType) -> None:
    """As ``BrokerStartup -p`` 5.3.3 prints them; the enum rule once made these ``MAX_VALUE`` and ``GB``."""
    assert tool.reduce_value("int", "Integer.MAX_VALUE") == "2147483647"
    assert tool.reduce_value("int", "Byte.MAX_VALUE") == "127"
    assert tool.reduce_value("long", "SizeUnit.GB") == "1073741824"
    assert tool.reduce_value("long", "256 * SizeUnit.MB") == "268435456"
    assert tool.reduce_value("int", "Foo.MAX_VALUE") == "=Foo.MAX_VALUE"
