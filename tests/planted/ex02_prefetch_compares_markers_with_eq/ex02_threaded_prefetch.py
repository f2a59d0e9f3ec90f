"""Planted defect: markers are private objects but compared with ==, which asks the item: a numpy array answers with an array (next() raises), an object equal to everything ends the stream."""

from solutions.ex02_threaded_prefetch import END, threaded_map  # noqa: F401
from solutions.ex02_threaded_prefetch import ThreadedPrefetcher as _Honest


class ThreadedPrefetcher(_Honest):
    def item_of(self, entry):
        if entry == END:  # the defect: == instead of `is`
            raise StopIteration
        return super().item_of(entry)
