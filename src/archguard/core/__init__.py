"""The policy core, pure: arch values, CUDA versions, coverage, toolkit and torch facts, the
bundled data and its plain-YAML reader, the policy, the resolution, the derivation rule and
the probe facts. It imports nothing from the other subpackages."""
