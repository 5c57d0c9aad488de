"""nvcc's command line: spelling a list, reading hard-coded flags, per-extension planning and
parallelism."""
