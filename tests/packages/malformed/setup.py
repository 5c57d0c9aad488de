from setuptools import setup

setup(name="malformed", version="1.0", py_modules=[])
