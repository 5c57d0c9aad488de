"""The pure policy core: arches, CUDA versions, coverage, toolkit/torch facts, policy, resolve."""
