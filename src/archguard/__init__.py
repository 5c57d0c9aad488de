"""archguard: one owned CUDA arch policy for PyTorch extension wheels.

Subpackages by job, imports running downhill: ``core`` (pure: arches, coverage, policy,
resolution; it imports none of the others) <- ``settings``, ``nvcc``, ``lint``, ``detect``,
``binaries``, ``reports``, ``user`` <- the edges ``_integration`` (setuptools) and ``_cli``.
The top level keeps the public surface: ``errors``, ``cpp_extension`` and ``__main__``.

Importing this module imports nothing else: the setuptools hook runs in every build.
"""

__version__ = "0.1.0"
