"""The course's grader: `pytest grader/` grades exercises/, `--target DIR` grades another folder."""
