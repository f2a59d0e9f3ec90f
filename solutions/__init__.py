"""Reference solutions: `pytest grader/ --target solutions` must pass on them."""
