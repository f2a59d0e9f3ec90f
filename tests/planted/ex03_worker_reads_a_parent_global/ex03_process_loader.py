"""Planted defect: the worker reads the transform from a module global that only the parent sets. Forked
workers inherit it; spawned workers import this module afresh and find None."""

from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter  # noqa: F401

_transform = None  # planted: set in the parent only


def _global_transform(image, rng):
    return _transform(image, rng)


class ProcessLoader(_Honest):
    def __init__(self, samples, transform, *args, **kwargs):
        global _transform
        _transform = transform
        super().__init__(samples, _global_transform, *args, **kwargs)
