"""The setuptools edge: a hook that activates archguard for packages that ask for it, and
command mixins that put the resolved arch list on the nvcc line and into the wheel.

``setuptools_hook`` runs in every setuptools build of the environment, so it imports only
the standard library until a package has opted in.
"""
