"""Planted defect: the slots get fixed names (unique per program, the same for every loader in it), so a
second loader alive at the same time cannot make its own."""

import os
from multiprocessing.shared_memory import SharedMemory

from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter  # noqa: F401


class ProcessLoader(_Honest):
    def make_slot(self, index, size):
        return SharedMemory(name=f"ex03_slot_{os.getpid()}_{index}", create=True, size=size)  # planted
