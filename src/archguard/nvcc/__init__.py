"""nvcc's command line: spelling a list, hard-coded flags, per-extension plans, parallelism."""
