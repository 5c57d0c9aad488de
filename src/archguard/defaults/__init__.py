"""Bundled data with provenance: the policy, toolkits, torch builds, devices, CUDA headers."""
