"""Setuptools entry: ships the ``twisted/plugins`` dropins beside the rmqpy package.

``find:`` in setup.cfg cannot see ``twisted/plugins`` because it has no ``__init__.py`` on
purpose (Twisted owns that namespace), so it is named here explicitly.
"""
from setuptools import find_packages, setup

# package_dir {"": "."} keeps setuptools' editable install a plain .pth of the checkout, so that
# `pip install -e .` puts the checkout's twisted/plugins on sys.path (Twisted finds dropins by
# scanning sys.path; the import-hook editable mode would hide them).
setup(
    package_dir={"": "."},
    packages=find_packages(include=["rmqpy", "rmqpy.*"]) + ["twisted.plugins"],
    # sample configs (conf/*.conf link to rmqpy/conf) and the Java defaults of docs/configuration.md
    package_data={"rmqpy": ["conf/*.conf"], "rmqpy.tools": ["java_defaults/*.properties"]},
)
