"""Bundled data: the arch policy and the facts about toolkits, torch builds, devices and
the toolkit and torch headers that define CUDA_VERSION.

Shipped inside the wheel as ``archguard.defaults`` and read at run time with
``importlib.resources``; each file names where its numbers came from.
"""
