"""Planted defect: two producer threads share the source to read ahead faster, so they advance it at the same time (a generator then fails at random, and the order is lost)."""

import threading

from solutions.ex02_threaded_prefetch import END, produce, threaded_map  # noqa: F401
from solutions.ex02_threaded_prefetch import ThreadedPrefetcher as _Honest


class ThreadedPrefetcher(_Honest):
    def start_producer(self, iterable, handoff):
        source, self.ends = iter(iterable), 0
        self.threads = [threading.Thread(target=produce, args=(source, handoff), name=f"prefetcher-{n}", daemon=True)
                        for n in range(2)]  # the defect: both advance `source`
        for thread in self.threads:
            thread.start()
        return self.threads[0]

    def item_of(self, entry):
        if entry is END:
            self.ends += 1
            if self.ends < len(self.threads):
                return next(self)
        return super().item_of(entry)

    def close(self):
        super().close()
        for thread in getattr(self, "threads", []):
            if thread is not threading.current_thread():
                thread.join(self.join_timeout_s)
