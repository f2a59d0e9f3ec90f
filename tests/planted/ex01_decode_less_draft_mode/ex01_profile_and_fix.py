"""Planted shortfall: step 4's crop (Pillow draft mode + one resize with a box) as step 5: right, not fast enough."""

from solutions.ex01_profile_and_fix import fast_center_crop as decode_less_crop  # noqa: F401
from solutions.ex01_profile_and_fix import Skipped, find_bottleneck, load_batches, profile_stages  # noqa: F401
