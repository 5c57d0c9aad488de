"""Edges on the real machine, read-only: CUDA tools, nvcc, torch, binaries, GPUs, sources; and
fetch, which alone writes (a build's source into archguard's own cache, for frontend and farm)."""
