"""Planted defect: waits for each copy to finish before going on (stream.synchronize()): right, but nothing overlaps."""

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
        self._source: Iterator[Batch] | None = iter(loader)
        self._pending: deque[Batch] = deque()  # issued to the device, not handed over yet
        self._error: BaseException | None = None

    def __iter__(self) -> DevicePrefetcher:
        return self

    def __next__(self) -> Batch:
        self._issue_until(1)
        if not self._pending:
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            raise StopIteration
        images, labels = self._pending.popleft()
        if self.stream is not None:
            caller = torch.cuda.current_stream(self.device)
            caller.wait_stream(self.stream)
            images.record_stream(caller)
            labels.record_stream(caller)
        self._issue_until(self.depth - 1)  # these copies run under the caller's work on this batch
        return images, labels

    def _issue_until(self, count: int) -> None:
        """Issue batches from the loader until `count` are pending, the loader ends, or it fails."""
        while len(self._pending) < count and self._source is not None and self._error is None:
            try:
                batch = next(self._source)
            except StopIteration:
                self._source = None
                return
            except Exception as err:  # raised after the batches before it are handed over
                self._error = err
                return
            self._pending.append(self._to_device(batch))

    def _to_device(self, batch: Batch) -> Batch:
        images, labels = batch
        if not (isinstance(images, torch.Tensor) and images.dtype == torch.uint8 and images.dim() == 4):
            raise TypeError(f"expected uint8 (N, C, H, W) image batches, got {getattr(images, 'dtype', type(images))} "
                            f"{tuple(getattr(images, 'shape', ()))}: keep the loader's batches uint8 (exercise 04).")
        labels = torch.as_tensor(labels)
        if self.stream is None:
            return self._normalise(images.to(self.device)), labels.to(self.device)
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.stream):
            images = images if images.is_pinned() else images.pin_memory()
            labels = labels if labels.is_pinned() else labels.pin_memory()
            batch = (self._normalise(images.to(self.device, non_blocking=True)),
                     labels.to(self.device, non_blocking=True))
        self.stream.synchronize()  # make sure the copy is done
        return batch

    def _normalise(self, images: torch.Tensor) -> torch.Tensor:
        if self.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        return images.float().div_(255).sub_(self.mean).div_(self.std)

    def close(self) -> None:
        """Stop: drop the pending batches, close the loader's iterator (a DataLoader's workers stop), wait for copies."""
        self._pending.clear()
        source, self._source = self._source, None
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
