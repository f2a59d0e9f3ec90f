"""Exercise 16, planted defect: checkpoints saved in a background thread, so that training does not wait for the
storage (here a second per checkpoint, as a network filesystem may take). A load, and the next save, wait for the save
in flight, so one process never sees the difference; but save_checkpoint returns before the checkpoint is at the path,
the rank script records the step as committed, and a rank that dies takes the write in flight with it."""

import threading
import time

from solutions.ex16_elastic_epochs import *  # noqa: F403
from solutions.ex16_elastic_epochs import load_checkpoint as _load, save_checkpoint as _save

STORAGE_S = 1.0
_in_flight: list[threading.Thread] = []


def _wait_for_the_save_in_flight():
    while _in_flight:
        _in_flight.pop().join()


def _slow_save(path, checkpoint):
    time.sleep(STORAGE_S)
    _save(path, checkpoint)


def save_checkpoint(path, checkpoint):
    _wait_for_the_save_in_flight()
    writer = threading.Thread(target=_slow_save, args=(path, checkpoint), daemon=True)  # planted: returns at once
    writer.start()
    _in_flight.append(writer)


def load_checkpoint(path):
    _wait_for_the_save_in_flight()
    return _load(path)
