"""loaderlab: the shared helpers of the course.

Measuring (`bench`), emulated storage and accelerator (`sim`), spans and plots
(`trace`, `plots`), the environment report (`doctor`), the reference loaders that
grades are measured against (`baselines`), image decoding references (`images`),
and where things live (`paths`).
"""

import os

# TensorFlow's C++ start-up chatter hides the lessons' output; errors still show.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from loaderlab.machine import usable_cores  # noqa: E402

__all__ = ["usable_cores"]
