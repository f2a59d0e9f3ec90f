"""Planted defect: close() marks the prefetcher finished but never stops or joins its thread."""

from solutions.ex02_threaded_prefetch import ThreadedPrefetcher as _Tidy
from solutions.ex02_threaded_prefetch import threaded_map  # noqa: F401


class ThreadedPrefetcher(_Tidy):
    def close(self):
        self._finished = True
