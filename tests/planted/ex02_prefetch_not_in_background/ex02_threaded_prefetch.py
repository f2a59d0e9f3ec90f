"""Planted defect: sequential loading dressed up with a thread that does nothing."""

import threading

from solutions.ex02_threaded_prefetch import threaded_map  # noqa: F401


class ThreadedPrefetcher:
    def __init__(self, iterable, depth=2):
        self._source = iter(iterable)
        self._thread = threading.Thread(target=lambda: None, daemon=True)
        self._thread.start()

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._source)

    def close(self):
        self._thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
