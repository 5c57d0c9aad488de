"""Edges that look at the real machine: nvcc, torch, cuobjdump.

Each returns plain data for the pure core (:class:`~archguard.core.toolkit.Toolkit`,
:class:`~archguard.core.torchbuild.TorchBuild`, target lists). Processes are run with fixed
argument lists, never through a shell.
"""
