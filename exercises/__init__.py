"""Your exercises. Edit exNN_*.py, then grade with `pytest grader/` (or `make grade`)."""
