"""Planted defect: one generator per worker, seeded with `seed` alone, so every worker repeats the same draws."""

from multiprocessing.shared_memory import SharedMemory

import numpy as np

from loaderlab.images import reference_crop
from solutions.ex03_process_loader import IMAGE_SHAPE
from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter  # noqa: F401


def _worker_one_generator(samples, transform, seed, slot_names, batch_size, pipe):
    rng = np.random.default_rng(seed)  # planted: made once per worker, identical in every worker
    slots = [SharedMemory(name=name) for name in slot_names]
    try:
        while (task := pipe.recv()) is not None:
            batch, slot, start, stop = task
            view = np.ndarray((batch_size, *IMAGE_SHAPE), np.uint8, buffer=slots[slot].buf)
            for row, index in enumerate(range(start, stop)):
                view[row] = transform(reference_crop(samples[index].path), rng)
            del view
            pipe.send(("ok", batch, np.array([samples[i].label for i in range(start, stop)], dtype=np.int64)))
    except (EOFError, OSError):
        pass
    finally:
        for shm in slots:
            shm.close()


class ProcessLoader(_Honest):
    worker = staticmethod(_worker_one_generator)
