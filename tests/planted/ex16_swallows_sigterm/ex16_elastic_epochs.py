"""Exercise 16, planted defect: a handler for SIGTERM, installed when the process group is joined, "to save a
checkpoint when the machine is preempted": it notes the signal and lets the rank go on. When a peer hangs and torchrun
stops the ranks to restart them, this rank does not end: torchrun waits 30 s before it sends SIGKILL, and the restart
waits with it."""

import signal

from solutions.ex16_elastic_epochs import *  # noqa: F403
from solutions.ex16_elastic_epochs import join as _join

PREEMPTED = []


def join(world):
    signal.signal(signal.SIGTERM, lambda number, frame: PREEMPTED.append(number))  # planted: SIGTERM swallowed
    _join(world)
