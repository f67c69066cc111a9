"""Setuptools entry: ships the ``twisted/plugins`` dropins beside the rmqpy package, and the Spark
data source (spark/rmqpy_spark) as the top-level ``rmqpy_spark``.

``find:`` in setup.cfg cannot see ``twisted/plugins`` because it has no ``__init__.py`` on
purpose (Twisted owns that namespace), so it is named here explicitly.
"""
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.editable_wheel import _StaticPth, editable_wheel


class EditableWheel(editable_wheel):
    """``pip install -e .``: a plain .pth of the checkout and of spark/.

    Twisted finds dropins by scanning sys.path for twisted/plugins, so the checkout itself must be on
    it; setuptools would choose its import-hook finder instead because rmqpy_spark lives in spark/
    (package_dir below). _StaticPth is setuptools' own .pth strategy (64+), given both directories.
    """

    def _select_strategy(self, name, tag, build_lib):
        root = Path(self.project_dir)
        return _StaticPth(self.distribution, name, [root, root / "spark"])


setup(
    package_dir={"": ".", "rmqpy_spark": "spark/rmqpy_spark"},
    packages=find_packages(include=["rmqpy", "rmqpy.*"]) + ["twisted.plugins", "rmqpy_spark"],
    # sample configs (conf/*.conf link to rmqpy/conf) and the Java defaults of docs/configuration.md
    package_data={"rmqpy": ["conf/*.conf", "conf/2m-2s-sync/*.properties", "conf/multi-core/*.conf",
                          "conf/controller/*.conf"],
                  "rmqpy.tools": ["java_defaults/*.properties", "java_defaults/*.json"]},
    cmdclass={"editable_wheel": EditableWheel},
    # the batch put path's per-message loops in C (rmqpy/speedups.py): plain CPython API, no other
    # headers or build dependency; optional, so that without a compiler the install goes on and the
    # pure-Python loops run (one log line says so)
    ext_modules=[Extension("rmqpy._speedups", ["rmqpy/_speedups.c"], optional=True)],
)
