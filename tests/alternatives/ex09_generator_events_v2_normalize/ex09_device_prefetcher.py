"""Correct alternative: a generator holds the look-ahead; torchvision's v2 normalize; on CUDA, an event per batch
(`wait_event`) instead of `wait_stream`, and the batch recorded on the caller's stream when it is handed over."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence

import torch
from torchvision.transforms.v2 import functional as F

from loaderlab.baselines import IMAGENET_MEAN, IMAGENET_STD

Batch = tuple[torch.Tensor, torch.Tensor]


class DevicePrefetcher:
    def __init__(self, loader: Iterable[Batch], device: torch.device | str, depth: int = 2,
                 mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD,
                 channels_last: bool = False) -> None:
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self.device, self.depth, self.channels_last = torch.device(device), depth, channels_last
        self.mean, self.std = [float(m) for m in mean], [float(s) for s in std]
        self.side = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None
        self._source: Iterator[Batch] | None = iter(loader)
        self._batches = self._run()

    def __iter__(self) -> DevicePrefetcher:
        return self

    def __next__(self) -> Batch:
        return next(self._batches)

    def _run(self) -> Iterator[Batch]:
        pending: deque[tuple[torch.Tensor, torch.Tensor, torch.cuda.Event | None]] = deque()
        failure: Exception | None = None
        while True:
            while self._source is not None and failure is None and len(pending) < self.depth:
                try:
                    batch = next(self._source)
                except StopIteration:
                    self._source = None
                    break
                except Exception as err:
                    failure = err
                    break
                pending.append(self._send(*batch))
            if not pending:
                break
            images, labels, ready = pending.popleft()
            if ready is not None:
                caller = torch.cuda.current_stream(self.device)
                caller.wait_event(ready)
                images.record_stream(caller)
                labels.record_stream(caller)
            yield images, labels
        if failure is not None:
            raise failure

    def _send(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.cuda.Event | None]:
        labels = torch.as_tensor(labels)
        if self.side is None:
            return self._normalise(images.to(self.device)), labels.to(self.device), None
        with torch.cuda.stream(self.side):
            images = images.to(self.device, non_blocking=True) if images.is_pinned() else \
                images.pin_memory().to(self.device, non_blocking=True)
            labels = labels.pin_memory().to(self.device, non_blocking=True)
            images = self._normalise(images)
            ready = torch.cuda.Event()
            ready.record(self.side)
        return images, labels, ready

    def _normalise(self, images: torch.Tensor) -> torch.Tensor:
        images = images.float().div(255)
        if self.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        return F.normalize(images, self.mean, self.std, inplace=True)

    def close(self) -> None:
        self._batches.close()
        source, self._source = self._source, None
        if callable(getattr(source, "close", None)):
            source.close()
        del source
        if self.side is not None:
            self.side.synchronize()
