"""Planted: the shipped script untouched (the frozen original): every defect at once. It loads in this process with
float32 items, so it waits for data most of the time and cannot beat itself twice over."""

from loaderlab.original_training_script import *  # noqa: F401,F403
