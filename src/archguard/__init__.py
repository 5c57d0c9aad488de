"""archguard: one owned CUDA arch policy for PyTorch extension wheels.

The package is laid out by concept: a pure core (``arch``, ``coverage``, ``policy``,
``toolkit``, ``torchbuild``, ``config``, ``resolve``) that never imports torch or runs a
process, thin edges that detect the real world (``detect``) or plug into setuptools
(``_integration``, ``cpp_extension``), and reports (``report``, ``verify``, ``matrix``).

Importing this module imports nothing else: the setuptools hook runs in every build.
"""

__version__ = "0.1.0"
