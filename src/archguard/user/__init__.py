"""The wheel's users and upkeep: variant metadata, doctor, the torch-release watcher."""
