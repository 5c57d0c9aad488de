"""Read-only edges on the real machine: CUDA tools, nvcc, torch, binaries, GPUs, sources."""
