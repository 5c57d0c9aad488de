"""The wheel's users and upkeep: variant metadata, doctor on a user's machine, the torch-
release watcher."""
