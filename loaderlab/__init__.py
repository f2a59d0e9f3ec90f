"""loaderlab: the shared helpers of the course.

Measuring (`bench`), emulated storage and accelerator (`sim`), spans and plots
(`trace`, `plots`), the environment report (`doctor`), the reference loaders that
grades are measured against (`baselines`), image decoding references (`images`),
and where things live (`paths`).
"""

from loaderlab.machine import usable_cores

__all__ = ["usable_cores"]
