"""The pure policy core: arches, CUDA versions, coverage, toolkit/torch facts, policy, resolve;
and the reading of wheel file names and core metadata (:mod:`archguard.core.wheelfile`)."""
