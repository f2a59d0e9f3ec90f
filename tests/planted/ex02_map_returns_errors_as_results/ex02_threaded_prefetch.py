"""Planted defect: fn's exception is caught on the worker and returned as a value; the consumer raises any result that is an exception object, so fn returning an exception object raises it."""

from solutions.ex02_threaded_prefetch import ThreadedPrefetcher, ThreadMap  # noqa: F401


def _capture(fn, item):
    try:
        return fn(item)
    except Exception as err:
        return err


class ErrorsAsResults(ThreadMap):
    def submit(self, pool, item):
        return pool.submit(_capture, self.fn, item)

    def deliver(self, future):
        result = future.result()
        if isinstance(result, BaseException):  # the defect: a returned exception object is raised too
            raise result
        yield result


def threaded_map(fn, items, num_threads=8, max_in_flight=None):
    yield from ErrorsAsResults(fn, num_threads, max_in_flight).results(items)
