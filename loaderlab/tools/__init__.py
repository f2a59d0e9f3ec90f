"""Commands, not a library: `install` (what `make lab` runs) and `doctor` (`make doctor`). The GPU reference run,
which imports the solutions, is a maintainers' tool beside them: `tests/gpu_reference.py`."""
