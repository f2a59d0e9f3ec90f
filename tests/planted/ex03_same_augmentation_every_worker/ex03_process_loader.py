"""Planted defect: one generator per worker, seeded with `seed` alone, so every worker repeats the same draws."""

from multiprocessing.shared_memory import SharedMemory

import numpy as np

from loaderlab.images import reference_crop
from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import random_flip_and_jitter, slot_array  # noqa: F401


def _worker_one_generator(samples, transform, seed, epoch, slot_names, batch_size, pipe):
    rng = np.random.default_rng(seed)  # planted: made once per worker, identical in every worker
    slots = [SharedMemory(name=name) for name in slot_names]
    try:
        while (task := pipe.recv()) is not None:
            batch, slot, start, stop = task
            view = slot_array(slots[slot].buf, batch_size)
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
