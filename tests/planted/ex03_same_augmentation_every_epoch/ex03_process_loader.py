"""Planted defect: sample i is seeded with default_rng([seed, i]), the epoch left out (the course's own rule
before the erratum): every epoch repeats the same augmentations."""

from multiprocessing.shared_memory import SharedMemory

import numpy as np

from loaderlab.images import reference_crop
from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter, slot_array  # noqa: F401


def _worker_without_epoch(samples, transform, seed, epoch, slot_names, batch_size, pipe):
    slots = [SharedMemory(name=name) for name in slot_names]
    try:
        while (task := pipe.recv()) is not None:
            batch, slot, start, stop = task
            view = slot_array(slots[slot].buf, batch_size)
            for row, index in enumerate(range(start, stop)):
                rng = np.random.default_rng([seed, index])  # planted: no epoch
                view[row] = transform(reference_crop(samples[index].path), rng)
            del view
            pipe.send(("ok", batch, np.array([samples[i].label for i in range(start, stop)], dtype=np.int64)))
    except (EOFError, OSError):
        pass
    finally:
        for shm in slots:
            shm.close()


class ProcessLoader(_Honest):
    worker = staticmethod(_worker_without_epoch)
