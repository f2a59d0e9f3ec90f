"""Commands, not a library: `install` (what `make lab` runs), `doctor` (`make doctor`) and `gpu_reference`
(a maintainer's run of a notebook on a GPU machine, with the solutions standing in for the exercises)."""
