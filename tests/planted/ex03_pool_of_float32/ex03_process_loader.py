"""Planted: the naive process loader dressed up as ProcessLoader. It maps over a Pool and ships every image
back pickled as float32, converting to uint8 in the parent: the right pixels, at the naive cost."""

import multiprocessing

import numpy as np

from solutions.ex03_process_loader import *  # noqa: F403
from solutions.ex03_process_loader import load_sample


def _load_float32(args):
    samples, index, transform, seed, epoch = args
    return load_sample(samples, index, transform, seed, epoch).astype(np.float32) / 255


class ProcessLoader:  # noqa: F811
    def __init__(self, samples, transform, batch_size, num_workers, seed, timeout_s=60.0, start_method=None, prefetch=2,
                 *, epoch=0):
        self._samples, self._batch_size = list(samples), batch_size
        with multiprocessing.get_context(start_method).Pool(num_workers) as pool:
            images = pool.map(_load_float32, [(self._samples, i, transform, seed, epoch) for i in range(len(self._samples))])
        self._batches = iter([
            (np.stack([np.round(x * 255).astype(np.uint8) for x in images[start:start + batch_size]]),
             np.array([s.label for s in self._samples[start:start + batch_size]], dtype=np.int64))
            for start in range(0, len(self._samples), batch_size)])

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._batches)

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
