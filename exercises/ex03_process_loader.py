"""Exercise 03: a loader whose workers are processes, so a GIL-holding transform runs in parallel.

`ProcessLoader(samples, transform, batch_size, num_workers, seed, ..., epoch=0)` yields
`(images, labels)` batches like exercise 01's loader, but each sample is decoded,
cropped and transformed in one of `num_workers` worker processes, and the pixels
come back through shared memory instead of being pickled.

Processes bring problems threads did not have: results that must be shipped back,
random generators copied into every worker, exceptions that stay in the child,
children that die without a word, and shared-memory segments that outlive the
program. You build it in steps; the grader grades each step on its own, so you can
stop after any step with something that passes it:

  1. batches in order   a process loader that returns batches in sample order
                        (pickling the pixels back is fine at this step)
  2. shared memory      pixels come back through shared-memory slots, not the pipe
  3. seeding            each sample gets its own generator, fresh every epoch
  4. errors and deaths  worker errors, dead workers and stuck workers are reported
  5. clean shutdown     close() never hangs and leaves nothing behind
  6. speed              timed against one process on a GIL-holding transform, and
                        against the naive `Pool.map` of float32 images (notebook 03)

Files: Every kind of file the dataset mixes (`data_gen.encodings`: progressive, 4:2:2
and 4:4:4, grayscale, Adobe CMYK and YCCK, EXIF-tagged camera files, a PNG under a
.jpg name) gives the reference's pixels (`loaderlab.images`: read by its content, kept
as stored with no EXIF rotation, grayscale as three equal channels, CMYK as Pillow
converts it).

Each step's TODO raises NotImplementedError naming it ("TODO(ex03, step 2) ..."), so the
steps you have not started read "not started" in the grade.
Grade: `pytest grader/test_ex03_process_loader.py` (add `--start-method spawn` to
grade it as macOS and Windows start workers). Hints: `make hint EX=ex03`.
"""

from __future__ import annotations

import multiprocessing  # noqa: F401  (you will need these)
from collections.abc import Callable, Sequence
from multiprocessing import connection  # noqa: F401
from multiprocessing.process import BaseProcess
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

    Given as an example transform; all randomness comes from `rng`.
    """
    if rng.random() < 0.5:
        image = image[:, ::-1]
    shift = int(rng.integers(-16, 17))
    return np.clip(image.astype(np.int16) + shift, 0, 255).astype(np.uint8)


# ---- step 2: shared-memory hand-over -----------------------------------------------------
# After step 1 every batch travels pickled through a pipe: about 5 MB per 32 images,
# serialised in the worker, copied through the kernel and unpickled in the parent,
# which waits meanwhile. Shared memory lets a worker write the pixels where the parent
# can read them. Build a ring of slots (segments of one batch each, one per batch in
# flight) that the parent creates and, in close(), unlinks; workers attach to them by
# name, write a batch into its slot and send back only small things (batch number,
# labels). A slot takes a new batch only once the parent has its batch out of it, and
# a batch you return must never change afterwards. Let the system name the segments:
# a train and a validation loader must be able to live at once. Then say in the
# docstring of ProcessLoader whether the parent copies a batch out or wraps it, and
# who creates and unlinks the segments.

def slot_array(buffer: memoryview | bytearray, rows: int) -> np.ndarray:
    """The uint8 (rows, 224, 224, 3) array whose memory IS `buffer` (a segment's `.buf`): no copy.

    Workers write a batch through it; the parent reads a batch out through it.
    """
    # TODO(ex03, step 2): make a numpy array that uses `buffer` as its memory (no copy), then
    # use it on both sides of the hand-over described above.
    raise NotImplementedError("TODO(ex03, step 2) in exercises/ex03_process_loader.py: slot_array (shared-memory hand-over)")


# ---- step 3: seeding ---------------------------------------------------------------------
# A generator made once per worker repeats its draws in every worker (fork copies its
# state, spawn unpickles it); one seeded with (seed, index) alone repeats them every
# epoch. A generator per sample, made from (seed, epoch, index), is reproducible,
# differs for every sample and every epoch, and does not care which worker runs it.

def sample_rng(seed: int, epoch: int, index: int) -> np.random.Generator:
    """The generator for sample `index` of epoch `epoch`: np.random.default_rng([seed, epoch, index])."""
    # TODO(ex03, step 3): return that generator, and hand it to the transform for every sample in the workers.
    raise NotImplementedError("TODO(ex03, step 3) in exercises/ex03_process_loader.py: sample_rng (seeding)")


# ---- step 4: errors and deaths -----------------------------------------------------------
# An exception in a worker stays in the worker unless you send it back; a worker killed
# by the out-of-memory killer sends nothing at all; a worker stuck on a network read
# sends nothing either, and stays alive. Report all three from next(), soon.

def describe_exit(exitcode: int | None) -> str:
    """How a worker process ended, in words, from its `exitcode` (None: still running)."""
    # TODO(ex03, step 4): a negative exit code means "killed by that signal" (name it); then make
    # the loader report worker errors, dead workers and stuck workers as the contract says.
    raise NotImplementedError("TODO(ex03, step 4) in exercises/ex03_process_loader.py: describe_exit (errors and deaths)")


# ---- step 5: clean shutdown --------------------------------------------------------------
# A worker busy on a slow sample does not read its stop message until it is done, so a
# close() that waits for it can wait as long as the slowest sample, or forever.

def stop_processes(processes: Sequence[BaseProcess], timeout_s: float) -> list[int]:
    """Join every process within `timeout_s` in all, then kill and join those still alive; their pids."""
    # TODO(ex03, step 5): do that, and make close() use it, safe to call twice, from every way out.
    raise NotImplementedError("TODO(ex03, step 5) in exercises/ex03_process_loader.py: stop_processes (clean shutdown)")


class ProcessLoader:
    """Batches of `(images uint8 (N, 224, 224, 3), labels int64 (N,))`, made by worker processes.

    Contract (the grader checks each point; [n] is the step that checks it):
    - [1] batches of `batch_size` consecutive samples, in sample order, the last
      partial batch kept; the same batches for every valid argument: any
      batch_size >= 1 (1, one that does not divide len(samples), one as large as
      the epoch or larger), any num_workers >= 1 (more workers than batches too),
      any prefetch >= 1;
    - [1] sample i is `transform(reference_crop(samples[i].path), rng)`, pixel for
      pixel, computed in the `num_workers` processes (all of them share the work) from
      `multiprocessing.get_context(start_method)` (None: the platform default), under
      "fork" and "spawn" alike, never in the parent;
    - [2] pixels travel through `multiprocessing.shared_memory.SharedMemory`: what
      the parent receives through pipes and queues is a small fraction of the pixel
      bytes (at most 5%: batch numbers and labels, never arrays of pixels);
    - [2] a batch, once returned, belongs to the caller: later batches, close()
      and other loaders never change it;
    - [2] two loaders can be alive and iterated at once: no fixed segment names, no
      state shared through module or class attributes;
    - [3] rng = `np.random.default_rng([seed, epoch, i])`: the same for the same
      (seed, epoch), different for every sample and every epoch, whichever worker
      loads it (never one generator per worker: they repeat each other's draws);
    - [4] an exception in a worker is raised from `next()` in the parent, its type
      name and message included (re-raising the same type is fine). It may be raised
      as soon as it arrives or when its batch's turn comes: the batches returned
      before it are right and in order, and no batch at or after the failing one is
      returned;
    - [4] a worker that dies (killed, crashed) is reported by an exception within
      seconds, long before `timeout_s`, with the same rule for the batches before it;
      its type name or message says how the worker ended: a word such as died, dead,
      killed, terminated, exit (code), signal or broken (so the standard library's
      `BrokenProcessPool: A process in the process pool was terminated abruptly ...`
      qualifies);
    - [4] `timeout_s` bounds each wait, not the batch or the epoch: next() raises
      TimeoutError (or an error whose message says it timed out) once it has waited
      `timeout_s` seconds with nothing arriving, while an epoch may last far longer
      than `timeout_s` in all;
    - [4] after an error from next(), no worker process and no segment is left;
    - [5] `close()`, leaving a `with` block, and iterating to the end stop every worker
      and unlink every segment the loader made; close() returns within seconds even
      while a worker is busy on a slow sample (stop it); close() twice is fine.
    `batch_size`, `num_workers` and `prefetch` (batches in flight per worker) are at least 1.
    """

    def __init__(self, samples: Sequence[Sample], transform: Transform, batch_size: int, num_workers: int,
                 seed: int, timeout_s: float = 60.0, start_method: str | None = None, prefetch: int = 2,
                 *, epoch: int = 0) -> None:
        # TODO(ex03, step 1): start `num_workers` worker processes from the context of `start_method`,
        # each running a worker function that you write at the top level of this module (spawn
        # pickles it by name, so it cannot be a method, a lambda or a nested function). Hand the
        # workers whole batches of sample indices, at most `num_workers * prefetch` in flight so
        # that memory stays bounded, and decide now which worker gets which batch: next() must
        # return batches in sample order, whichever worker is faster. For now a worker may send
        # the pixels back pickled and give the transform any numpy Generator (steps 2 and 3).
        raise NotImplementedError("TODO(ex03, step 1) in exercises/ex03_process_loader.py: ProcessLoader.__init__")

    def __iter__(self) -> ProcessLoader:
        return self

    def __next__(self) -> tuple[np.ndarray, np.ndarray]:
        # TODO(ex03, step 1): return the next batch in sample order: wait for it (with a timeout,
        # never forever), keep batches that arrive early until their turn, hand out more
        # work as batches leave; after the last batch, close() and raise StopIteration.
        raise NotImplementedError("TODO(ex03, step 1) in exercises/ex03_process_loader.py: ProcessLoader.__next__")

    def close(self) -> None:
        # TODO(ex03, step 1): tell every worker to stop and wait for it to exit, so no process is
        # left behind (step 5 makes this robust against busy and stuck workers).
        raise NotImplementedError("TODO(ex03, step 1) in exercises/ex03_process_loader.py: ProcessLoader.close")

    def __enter__(self) -> ProcessLoader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


# Your worker function goes here, at the top level of this module (step 1).
