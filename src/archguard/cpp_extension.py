"""Drop-in replacements for ``torch.utils.cpp_extension`` in a package's ``setup.py``::

    from archguard.cpp_extension import BuildExtension, CUDAExtension

    setup(..., ext_modules=[CUDAExtension("pkg._C", ["pkg/kernel.cu"])],
          cmdclass={"build_ext": BuildExtension})

``BuildExtension`` is torch's, with archguard's mixin first in its MRO (the same code the
setuptools hook applies; it is never applied twice), so it works with or without the hook
and with ``BuildExtension.with_options(...)``. ``CUDAExtension`` and ``CppExtension`` are
torch's own. Importing this module imports torch: only a package that builds with torch
does it.
"""

from __future__ import annotations

from torch.utils.cpp_extension import BuildExtension as _TorchBuildExtension
from torch.utils.cpp_extension import CppExtension, CUDAExtension

from archguard._integration.commands import wrap_build_ext

BuildExtension = wrap_build_ext(_TorchBuildExtension)

__all__ = ["BuildExtension", "CUDAExtension", "CppExtension"]
