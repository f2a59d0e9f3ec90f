"""Planted defect: the shared-memory slots exist and workers write into them, but each worker also sends its
batch's pixels back pickled through the pipe, and the parent uses those: the technique, bypassed."""

from multiprocessing.shared_memory import SharedMemory

import numpy as np

from solutions.ex03_process_loader import ProcessLoader as _Honest
from solutions.ex03_process_loader import load_sample, random_flip_and_jitter, slot_array  # noqa: F401


def _worker_pickling_pixels(samples, transform, seed, epoch, slot_names, batch_size, pipe):
    slots = [SharedMemory(name=name) for name in slot_names]
    try:
        while (task := pipe.recv()) is not None:
            batch, slot, start, stop = task
            images = np.stack([load_sample(samples, i, transform, seed, epoch) for i in range(start, stop)])
            view = slot_array(slots[slot].buf, batch_size)
            view[: len(images)] = images
            del view
            labels = np.array([samples[i].label for i in range(start, stop)], dtype=np.int64)
            pipe.send(("ok", batch, labels, images))  # planted: the pixels travel pickled as well
    except (EOFError, OSError):
        pass
    finally:
        for shm in slots:
            shm.close()


class ProcessLoader(_Honest):
    worker = staticmethod(_worker_pickling_pixels)

    def handle(self, worker_id, message):
        if message[0] == "ok":
            _, batch, labels, images = message
            return batch, (labels, images)
        return super().handle(worker_id, message)

    def collect(self, batch):
        labels, images = self.wait_for(batch)  # the pickled pixels, not the slot's
        return images, labels
