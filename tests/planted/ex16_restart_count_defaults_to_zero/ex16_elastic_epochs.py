"""Exercise 16, planted defect: a missing TORCHELASTIC_RESTART_COUNT is taken as 0 instead of refused."""

import os

import solutions.ex16_elastic_epochs as honest
from solutions.ex16_elastic_epochs import *  # noqa: F403


def world_from_environment():
    missing = "TORCHELASTIC_RESTART_COUNT" not in os.environ
    if missing:
        os.environ["TORCHELASTIC_RESTART_COUNT"] = "0"  # planted: a default where torchrun always sets it
    try:
        return honest.world_from_environment()
    finally:
        if missing:
            del os.environ["TORCHELASTIC_RESTART_COUNT"]
