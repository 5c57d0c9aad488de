from setuptools import Extension, setup

setup(ext_modules=[Extension("cext", ["cext.c"])])
