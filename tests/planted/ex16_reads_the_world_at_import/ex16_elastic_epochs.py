"""Exercise 16, planted defect: the world is read once, when the module is imported, and kept."""

import os

import solutions.ex16_elastic_epochs as honest
from solutions.ex16_elastic_epochs import *  # noqa: F403

AT_IMPORT = {name: os.environ.get(name) for name in honest.TORCHRUN_VARIABLES}


def world_from_environment():
    world = honest.world_from_environment()  # a broken environment is still refused
    if all(value is not None for value in AT_IMPORT.values()):
        return honest.World(*(int(AT_IMPORT[name]) for name in honest.TORCHRUN_VARIABLES))  # planted: import's world
    return world
