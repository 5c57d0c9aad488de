"""archguard: one owned CUDA arch policy for PyTorch extension wheels.

Subpackages by job, in layers, imports running only downhill (checked by
``tests/test_layout.py``): ``core`` (pure: arches, coverage, policy, resolution) and
``nvcc_steps`` (the nvcc launcher, run as a script per compile: the standard library and
``jobserver`` only) <- ``detect``
(reads the machine: tools, nvcc, torch, cores) <- ``nvcc`` (flags, plan, parallelism) and
``lint`` <- ``settings`` (inputs assembled) <- ``binaries`` (verify, record, stubs) <-
``reports`` and ``user`` (doctor, variant, watch) <- the edges: ``_integration`` (the
setuptools hook inside pip's build, farm mode) and ``frontend`` (``archguard wheel``, which
launches pip) <- ``farm`` (the manifest, its plan, its runs and site) <- ``_cli``. The top
level keeps the public surface: ``errors``, ``cpp_extension`` and ``__main__``, and
``jobserver`` (GNU make's protocol, standard library only). Below every layer, importing
nothing of archguard: ``_fs`` (files several processes share) and ``_http`` (opening a URL).

Importing this module imports nothing else: the setuptools hook runs in every build.
"""

__version__ = "0.1.0"
