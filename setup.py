"""Setuptools entry: ships the ``twisted/plugins`` dropins beside the rmqpy package.

``find:`` in setup.cfg cannot see ``twisted/plugins`` because it has no ``__init__.py`` on
purpose (Twisted owns that namespace), so it is named here explicitly.
"""
from setuptools import find_packages, setup

setup(packages=find_packages(include=["rmqpy", "rmqpy.*"]) + ["twisted.plugins"])
