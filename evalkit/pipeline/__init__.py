"""Running: run settings to a stored, verified run (runner), prerequisites, the cost plan, and runs users give."""
