"""Exercise 16, planted defect: the state's ints are checked with isinstance, which takes a bool for an int."""

import solutions.ex16_elastic_epochs as honest
from solutions.ex16_elastic_epochs import *  # noqa: F403


def is_int(value):
    return isinstance(value, int)  # planted: True passes


honest.is_int = is_int  # the solution's position_from checks through it
