"""The core every layer stands on: errors, hashing, configuration files, devices, locks, progress, the workspace."""
