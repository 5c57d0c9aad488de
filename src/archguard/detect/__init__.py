"""Edges that look at the real machine, read-only: the CUDA tools (one search order and
runner, ``tools``), nvcc, torch, the binaries' images (cuobjdump, SASS), GPUs, memory and
cores, a project's source tree.

Each returns plain data for the pure core (:class:`~archguard.core.toolkit.Toolkit`,
:class:`~archguard.core.torchbuild.TorchBuild`, target lists). Processes are run with fixed
argument lists, never through a shell (``tools.run``).
"""
