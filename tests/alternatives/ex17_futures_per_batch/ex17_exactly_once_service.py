"""Exercise 17, another route to exactly once: each next batch of a job is asked for as a future of a one-thread
executor and waited for with the deadline (`Future.result(timeout=...)`); nothing is read ahead, so closing the
iterator stops the job at once. A job given up is left with its executor (shut down without waiting): the pending
`next` stays blocked inside the service until the job speaks or the process ends."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, TimeoutError as FutureTimeout
from typing import Any

import numpy as np

from solutions.ex17_exactly_once_service import BATCH_TIMEOUT_S, rank_plan, request_epoch  # noqa: F401

Batch = tuple[np.ndarray, np.ndarray, np.ndarray]
JOB_ENDED = object()


def exactly_once(request: Callable[[list[int]], Iterable[Any]], keys: Sequence[int], sizes: Sequence[int],
                 batch_timeout_s: float | None = None) -> Iterator[Batch]:
    deadline = BATCH_TIMEOUT_S if batch_timeout_s is None else float(batch_timeout_s)
    keys, sizes = [int(k) for k in keys], [int(s) for s in sizes]
    if len(set(keys)) != len(keys):
        raise ValueError("a key appears twice in keys")
    if min(sizes, default=1) < 1 or sum(sizes) != len(keys):
        raise ValueError(f"sizes {sizes[:8]} do not split {len(keys)} keys into non-empty batches")
    if deadline <= 0:
        raise ValueError(f"batch_timeout_s must be positive, not {deadline}")
    wanted = set(keys)
    pending: dict[int, tuple[Any, Any]] = {}   # arrived, not yet yielded, in arrival order
    done: set[int] = set()
    while len(done) + len(pending) < len(wanted):
        asked = [k for k in keys if k not in done and k not in pending]
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ex17-next")
        got_any = False
        try:
            job = executor.submit(lambda: iter(request(asked))).result(timeout=deadline)
            while True:
                batch = executor.submit(next, job, JOB_ENDED).result(timeout=deadline)
                if batch is JOB_ENDED:
                    break
                got_any = True
                for key, label, image in zip(np.asarray(batch[0]).tolist(), np.asarray(batch[1]),
                                             np.asarray(batch[2])):
                    if key not in wanted:
                        raise ValueError(f"key {key} arrived but was never asked for")
                    if key not in done and key not in pending:
                        pending[key] = (label, image)
                while sizes and len(pending) >= sizes[0]:
                    yield _take(pending, done, sizes.pop(0))
        except FutureTimeout:
            pass   # silent for the whole deadline: given up, the rest asked of a new job
        finally:
            executor.shutdown(wait=False, cancel_futures=True)
        if not got_any and len(done) + len(pending) < len(wanted):
            raise TimeoutError(f"{len(wanted) - len(done) - len(pending)} keys still missing; the new job sent nothing "
                               f"in {deadline:g} s")
    while sizes:
        yield _take(pending, done, sizes.pop(0))


def _take(pending: dict[int, tuple[Any, Any]], done: set[int], size: int) -> Batch:
    chosen = list(pending)[:size]
    rows = [pending.pop(k) for k in chosen]
    done.update(chosen)
    return np.array(chosen, dtype=np.int64), np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])
