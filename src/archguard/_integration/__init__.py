"""The setuptools edge, inside pip's build: the opt-in hook and the wrapped build_ext."""
