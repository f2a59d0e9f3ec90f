"""Exercise 03: a loader whose workers are processes, so a GIL-holding transform runs in parallel.

`ProcessLoader(samples, transform, batch_size, num_workers, seed)` yields
`(images, labels)` batches like exercise 01's loader, but each sample is decoded,
cropped and transformed in one of `num_workers` worker processes, and the pixels
come back through shared memory instead of being pickled.

Processes bring problems threads did not have: random generators copied into
every worker, exceptions that stay in the child, children that die without a
word, and shared-memory segments that outlive the program. The grader checks
each of them before it times anything. Then it times your loader twice: against
one process on a GIL-holding transform, and against the naive `Pool.map` that
returns normalised float32 images (notebook 03, section 4).
Grade: `pytest grader/test_ex03_process_loader.py` (add `--start-method spawn` to
grade it as macOS and Windows start workers). Hints: `make hint EX=ex03`.
"""

from __future__ import annotations

import multiprocessing  # noqa: F401  (you will need these)
from collections.abc import Callable, Sequence
from multiprocessing import connection  # noqa: F401
from multiprocessing.shared_memory import SharedMemory  # noqa: F401

import numpy as np

from loaderlab.images import CROP, Sample, reference_crop  # noqa: F401

# transform(image, rng) -> image: takes a uint8 (224, 224, 3) crop and a numpy
# Generator, returns a uint8 (224, 224, 3) array. It runs in the workers, so it
# must be picklable: a top-level function of a .py module, or a
# functools.partial of one (never a lambda or a function defined in a notebook).
Transform = Callable[[np.ndarray, np.random.Generator], np.ndarray]
IMAGE_SHAPE = (CROP, CROP, 3)


def random_flip_and_jitter(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A light augmentation: horizontal flip with probability 1/2, then a brightness shift in [-16, 16].

    Given as an example transform (the grader uses it too); all randomness comes from `rng`.
    """
    if rng.random() < 0.5:
        image = image[:, ::-1]
    shift = int(rng.integers(-16, 17))
    return np.clip(image.astype(np.int16) + shift, 0, 255).astype(np.uint8)


class ProcessLoader:
    """Batches of `(images uint8 (N, 224, 224, 3), labels int64 (N,))`, made by worker processes.

    Contract (the grader checks each point):
    - batches of `batch_size` samples in sample order, the last partial batch
      kept; the same pixels for any `num_workers`;
    - sample i is `transform(reference_crop(samples[i].path), rng)` with
      `rng = np.random.default_rng([seed, i])`: reproducible per sample, whichever
      worker loads it (never one generator per worker: they would repeat draws);
    - the work runs in `num_workers` processes from
      `multiprocessing.get_context(start_method)` (None: the platform default),
      under "fork" and "spawn" alike;
    - pixels travel through `multiprocessing.shared_memory.SharedMemory`, not
      pickled through a queue; say in this docstring whether the parent copies
      a batch out or wraps it, and who creates and unlinks the segments;
    - an exception in a worker is raised from `next()` in the parent, with the
      worker's exception type name and message;
    - a worker that dies (killed, crashed) is reported by an exception, soon:
      every wait has a timeout (`timeout_s` at most) and checks that the worker
      is still alive; nothing ever hangs;
    - `close()`, leaving a `with` block, and iterating to the end stop and join
      every worker and unlink every shared-memory segment; close() twice is fine.
    """

    def __init__(self, samples: Sequence[Sample], transform: Transform, batch_size: int, num_workers: int,
                 seed: int, timeout_s: float = 60.0, start_method: str | None = None, prefetch: int = 2) -> None:
        # TODO(ex03a): split range(len(samples)) into batches; create shared-memory
        # slots (the parent owns them: SharedMemory(create=True, size=...)), one
        # per batch in flight (e.g. num_workers * prefetch); start `num_workers`
        # processes from multiprocessing.get_context(start_method), each running a
        # TOP-LEVEL worker function (spawn pickles it by name) with a Pipe or
        # Queue for tasks and replies; then hand out the first tasks.
        raise NotImplementedError("TODO(ex03a) in exercises/ex03_process_loader.py: ProcessLoader.__init__")

    def __iter__(self) -> ProcessLoader:
        return self

    def __next__(self) -> tuple[np.ndarray, np.ndarray]:
        # TODO(ex03b): wait for the NEXT batch in order (keep early ones aside),
        # with a timeout, checking the worker's is_alive() / exitcode while you
        # wait (multiprocessing.connection.wait([pipe, process.sentinel], timeout)
        # wakes on either); raise the worker's error if it sent one; copy the
        # pixels out of their slot, free the slot for the next task, return.
        # At the end, close() and raise StopIteration.
        raise NotImplementedError("TODO(ex03b) in exercises/ex03_process_loader.py: ProcessLoader.__next__")

    def close(self) -> None:
        # TODO(ex03c): tell every worker to stop, join with a timeout, kill those
        # still alive, then close() AND unlink() every segment. Safe to call twice.
        raise NotImplementedError("TODO(ex03c) in exercises/ex03_process_loader.py: ProcessLoader.close")

    def __enter__(self) -> ProcessLoader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


# TODO(ex03d): the worker function goes here, at the top level of this module:
# for each task, for each sample index i of its batch:
#     image = transform(reference_crop(samples[i].path), np.random.default_rng([seed, i]))
# write the images into the task's shared-memory slot and send back (batch, labels);
# on an exception send (batch, type(err).__name__, str(err)) instead of dying.
