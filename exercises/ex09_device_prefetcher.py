"""Exercise 09: feed the device. Copy the next batch while the current one is being computed on.

`DevicePrefetcher(loader, device, depth=2, mean, std, channels_last=False)` wraps any iterable of
`(images, labels)` CPU batches (uint8 (N, 3, H, W) images and int64 labels, as your exercise-04
loader yields them) and yields them on `device`: the images converted to float32, scaled to [0, 1]
and normalised THERE, once per batch. On a CUDA GPU the copy of the next batch runs on a side
stream, from pinned memory, while the caller's kernels work on the current one. Without CUDA the
same code runs on the CPU (or MPS) with no streams and gives the same numbers.

The grader checks, on every machine: values bit-identical to the same normalisation done directly,
every batch once and in order (the last, partial one too), uint8 crossing to the device, the next
batch issued before the current one is handed over, the loader's errors surfaced, and a clean
`close()`; and your CUDA branch, run against a CPU stand-in of CUDA (streams, events, pinned copies):
it may call only what torch has, as torch takes it, and must hand over the same numbers. On a CUDA GPU
only: copies from pinned memory with non_blocking=True on a side stream, no data race under PyTorch's
CUDA sanitizer, buffers kept until the caller's kernels are done with them; then the speed of overlap
against copy-then-compute. On a machine without a GPU those checks are skipped, the grade says why
under each step, and the exercise reads "correct here, GPU part not graded" at best: only a GPU
makes it "done". Grade: `pytest grader/test_ex09_device_prefetcher.py`. Hints: `make hint EX=ex09`.
"""

from __future__ import annotations

from collections import deque  # noqa: F401  (you will need these)
from collections.abc import Iterable, Iterator, Sequence  # noqa: F401

import torch

from loaderlab.baselines import IMAGENET_MEAN, IMAGENET_STD

Batch = tuple[torch.Tensor, torch.Tensor]


class DevicePrefetcher:
    """Yields the `(images, labels)` batches of `loader` on `device`, normalised there, copied ahead.

    Contract (the grader checks each point):
    - every batch of `loader` once, in order, the last partial one too, as `(images, labels)` on
      `device`: images float32, equal bit for bit to
      `images.to(device).float().div(255).sub(mean).div(std)` with `mean` and `std` as float32
      tensors of shape (1, 3, 1, 1) on the device; labels int64; with `channels_last`, images in
      `torch.channels_last` memory format (same values);
    - what crosses to the device is the uint8 batch: convert after `.to(device)`, never before.
      Call `.to(device)` on every device (on the CPU it is a no-op), so one code path serves all;
    - when batch k is handed over, batches k+1 .. k+depth-1 have already been taken from `loader`
      and their copies issued, and no batch after them: `depth` batches counting the one handed over
      (fewer at the loader's end; depth=1: no look-ahead);
    - an exception raised by `loader` reaches the caller (same type and message) after the batches
      before it; `close()` (or leaving a `with` block) stops: it closes the loader's iterator (a
      DataLoader's worker processes stop) and leaves nothing running;
    - on CUDA: the copy runs on a side stream (`torch.cuda.Stream`), from pinned memory, with
      `non_blocking=True`: a batch that arrives pinned (a DataLoader with pin_memory=True pins on its
      own thread) is copied as it is, and one that arrives unpinned is pinned here, as a fallback; the
      caller's stream waits for it before using a batch; every tensor handed over is protected from
      reuse until the caller's stream is done with it.
    """

    def __init__(self, loader: Iterable[Batch], device: torch.device | str, depth: int = 2,
                 mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD,
                 channels_last: bool = False) -> None:
        # TODO(ex09, step 1): keep the device (torch.device(device)), depth and channels_last; make `mean` and
        # `std` float32 tensors shaped (1, 3, 1, 1) ON the device, once, here; start iterating the loader;
        # make an empty queue of batches already sent to the device. Only where the device is CUDA,
        # create a side stream for the copies: the caller's kernels run on the current stream, and two
        # streams are what lets a copy and a kernel run at the same time.
        raise NotImplementedError("TODO(ex09, step 1) in exercises/ex09_device_prefetcher.py: DevicePrefetcher.__init__")

    def __iter__(self) -> DevicePrefetcher:
        return self

    def __next__(self) -> Batch:
        # TODO(ex09, step 2): make sure one batch is on its way (on the first call none is), take the oldest
        # one, and only then send the next depth-1 batches on their way, so that their copies run while
        # the caller computes on the one returned. At the end of the loader raise StopIteration; if
        # the loader failed, raise its exception once the batches before it are handed over.
        # On CUDA, before returning: the caller's stream must wait for the side stream (or it may read
        # a batch still being copied), and each returned tensor must be recorded as used by the
        # caller's stream (or the allocator may hand its memory to the next copy while the caller's
        # kernels still read it).
        raise NotImplementedError("TODO(ex09, step 2) in exercises/ex09_device_prefetcher.py: DevicePrefetcher.__next__")

    def _to_device(self, batch: Batch) -> Batch:
        """Send one (uint8 images, labels) batch to the device and normalise it there; returns device tensors."""
        # TODO(ex09, steps 1, 3): the batch on the device, normalised as the contract says (its order of operations: another
        # order gives other bits). Without CUDA an ordinary copy will do. With CUDA the copy must run beside the
        # caller's work, not before it: on a stream of your own, from memory the copy engine can read while the
        # CPU goes on, and ordered after anything the caller's stream was still doing with what it hands you.
        raise NotImplementedError("TODO(ex09, steps 1, 3) in exercises/ex09_device_prefetcher.py: DevicePrefetcher._to_device")

    def close(self) -> None:
        """Stop: drop pending batches and close the loader's iterator; leave nothing running."""
        # TODO(ex09, step 2): forget the pending batches, close the loader's iterator if it has close() (a
        # generator does) and drop your reference to it (a DataLoader's workers stop when their
        # iterator goes), and on CUDA wait for the side stream to finish what it was given.
        raise NotImplementedError("TODO(ex09, step 2) in exercises/ex09_device_prefetcher.py: DevicePrefetcher.close")

    def __enter__(self) -> DevicePrefetcher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
