"""The setuptools edge: the opt-in hook, the wrapped build_ext, the farm cell (wheel)."""
