"""Setuptools shim: ships the twisted.plugins dropins next to the rmqpy package.

setup.cfg's ``find:`` cannot see ``twisted/plugins`` (it has no ``__init__.py``, on purpose:
Twisted's own ``twisted.plugins`` package must stay the owner of that namespace).
"""
from setuptools import setup

setup(packages=["rmqpy"] + [], package_dir={}, data_files=[])
