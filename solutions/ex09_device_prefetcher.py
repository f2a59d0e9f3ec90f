"""Exercise 09, reference solution: a prefetcher that copies the next batch to the device under the current step.

Design choices:
- each batch crosses the bus as uint8 (a quarter of float32's bytes) and is converted and normalised on the
  device, once per batch, in exactly the reference's order of operations (so results are bit-identical);
- on CUDA the copy is issued on a side stream from pinned host memory with `non_blocking=True`, so it runs
  on the copy engine while the caller's kernels run on theirs; the side stream first waits for the caller's
  stream (it then sees mean/std, and never writes memory the caller's queued work may still read);
- before a batch is handed over, the caller's stream waits for the side stream (`wait_stream`), and every
  tensor handed over is marked as used by the caller's stream (`record_stream`), so the caching allocator
  does not give its memory back to the side stream while the caller's kernels still read it;
- the next `depth - 1` batches are issued before a batch is handed over; the wrapped loader's error is kept
  and raised once the batches before it are handed over;
- without CUDA the same code runs with no streams and no pinning (`.to(device)` is a no-op on the CPU).

Each of these choices is a small public method (hand_over, issue_ahead, issue_until, on_loader_error, send,
side_stream_waits_for_caller, pinned, normalise), so that tests/planted/ex09_* replace one and keep the rest.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence

import torch

from loaderlab.baselines import IMAGENET_MEAN, IMAGENET_STD

Batch = tuple[torch.Tensor, torch.Tensor]


class DevicePrefetcher:
    """Yields the `(images, labels)` batches of `loader` on `device`: images float32, scaled to [0, 1] and
    normalised there, `depth - 1` batches copied ahead of the one handed over."""

    def __init__(self, loader: Iterable[Batch], device: torch.device | str, depth: int = 2,
                 mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD,
                 channels_last: bool = False) -> None:
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self.device = torch.device(device)
        self.depth = depth
        self.channels_last = channels_last
        self.mean = torch.as_tensor(mean, dtype=torch.float32).view(1, -1, 1, 1).to(self.device)
        self.std = torch.as_tensor(std, dtype=torch.float32).view(1, -1, 1, 1).to(self.device)
        self.stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None
        self.source: Iterator[Batch] | None = iter(loader)  # the loader's iterator; None once it has ended
        self.pending: deque[Batch] = deque()  # issued to the device, not handed over yet
        self._error: BaseException | None = None

    def __iter__(self) -> DevicePrefetcher:
        return self

    def __next__(self) -> Batch:
        self.issue_until(1)
        if not self.pending:
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            raise StopIteration
        batch = self.hand_over(self.pending.popleft())
        self.issue_ahead()
        return batch

    def hand_over(self, batch: Batch) -> Batch:
        """Make the caller's stream wait for the batch's copy, and mark its tensors as used by the caller's stream."""
        if self.stream is not None:
            caller = torch.cuda.current_stream(self.device)
            caller.wait_stream(self.stream)
            for tensor in batch:
                tensor.record_stream(caller)
        return batch

    def issue_ahead(self) -> None:
        """Issue the next `depth - 1` batches: their copies run under the caller's work on the batch just handed over."""
        self.issue_until(self.depth - 1)

    def issue_until(self, count: int) -> None:
        """Issue batches from the loader until `count` are pending, the loader ends, or it fails."""
        while len(self.pending) < count and self.source is not None and self._error is None:
            try:
                batch = next(self.source)
            except StopIteration:
                self.source = None
                return
            except Exception as err:
                self.on_loader_error(err)
                return
            self.pending.append(self._to_device(batch))

    def on_loader_error(self, err: Exception) -> None:
        """The loader raised `err`: keep it, to raise once the batches before it are handed over."""
        self._error = err

    def _to_device(self, batch: Batch) -> Batch:
        images, labels = batch
        if not (isinstance(images, torch.Tensor) and images.dtype == torch.uint8 and images.dim() == 4):
            raise TypeError(f"expected uint8 (N, C, H, W) image batches, got {getattr(images, 'dtype', type(images))} "
                            f"{tuple(getattr(images, 'shape', ()))}: keep the loader's batches uint8 (exercise 04).")
        return self.send(images, torch.as_tensor(labels))

    def send(self, images: torch.Tensor, labels: torch.Tensor) -> Batch:
        """Issue the copy of one batch and its normalisation on the device; return without waiting for them."""
        if self.stream is None:
            return self.normalise(images.to(self.device)), labels.to(self.device)
        self.side_stream_waits_for_caller()
        with torch.cuda.stream(self.stream):
            images, labels = self.pinned(images), self.pinned(labels)
            return (self.normalise(images.to(self.device, non_blocking=True)),
                    labels.to(self.device, non_blocking=True))

    def side_stream_waits_for_caller(self) -> None:
        """Before each copy: the side stream then sees mean/std, and never writes memory the caller's queued work
        may still read."""
        self.stream.wait_stream(torch.cuda.current_stream(self.device))

    @staticmethod
    def pinned(tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` in page-locked host memory: only from there is a `non_blocking` copy asynchronous."""
        return tensor if tensor.is_pinned() else tensor.pin_memory()

    def normalise(self, images: torch.Tensor) -> torch.Tensor:
        if self.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        return images.float().div_(255).sub_(self.mean).div_(self.std)

    def close(self) -> None:
        """Stop: drop the pending batches, close the loader's iterator (a DataLoader's workers stop), wait for copies."""
        self.pending.clear()
        source, self.source = self.source, None
        close = getattr(source, "close", None)
        if callable(close):
            close()
        del source
        if self.stream is not None:
            self.stream.synchronize()

    def __enter__(self) -> DevicePrefetcher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
