"""Settings: [tool.archguard], ARCHGUARD_*, the opt-in, the one assembly of the inputs."""
