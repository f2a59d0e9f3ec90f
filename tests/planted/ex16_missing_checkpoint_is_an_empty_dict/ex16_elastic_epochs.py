"""Exercise 16, planted defect: load_checkpoint returns {} where there is no file, not None."""

import solutions.ex16_elastic_epochs as honest
from solutions.ex16_elastic_epochs import *  # noqa: F403


def load_checkpoint(path):
    checkpoint = honest.load_checkpoint(path)
    return {} if checkpoint is None else checkpoint  # planted
