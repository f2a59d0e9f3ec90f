"""Measuring throughput honestly on a noisy machine.

`measure` times one iterable; `compare` interleaves a baseline and a candidate
(baseline, candidate, baseline, ...) after a warm-up and reports the median of the
per-round ratios, so that a busy neighbour slows both sides alike. Against a target,
it stops as soon as the remaining rounds can no longer move the median across it.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from loaderlab.machine import free_cores, usable_cores

MakeIterable = Callable[[], Iterable[Any]]
CountItems = Callable[[Any], int]


def count_one(_: Any) -> int:
    """Each yielded element is one item."""
    return 1


def count_batch(batch: Any) -> int:
    """Each yielded element is a batch, or an (images, labels, ...) tuple of batches."""
    first = batch[0] if isinstance(batch, (tuple, list)) else batch
    return len(first)


@dataclass(frozen=True)
class Measurement:
    """Items counted over seconds spent, for one or more passes."""

    items: int
    seconds: float

    @property
    def items_per_s(self) -> float:
        return self.items / self.seconds if self.seconds > 0 else float("inf")


def measure(
    make_iterable: MakeIterable,
    *,
    count: CountItems = count_one,
    warmup_items: int = 0,
    max_items: int | None = None,
    min_seconds: float = 0.0,
) -> Measurement:
    """Time passes over a freshly made iterable and return items and seconds.

    With `warmup_items=0` the clock starts before the iterable is made, so start-up
    costs (spawning workers, opening files) count; otherwise the first
    `warmup_items` items are consumed untimed. A pass stops at `max_items` or when
    the iterable ends; passes repeat until `min_seconds` have been measured. The
    iterable (and its iterator) is closed after each pass, also on error.
    """
    items, seconds = 0, 0.0
    while True:
        once = _one_pass(make_iterable, count, warmup_items, max_items)
        items, seconds = items + once.items, seconds + once.seconds
        if seconds >= min_seconds or once.items == 0:
            return Measurement(items, seconds)


def _one_pass(make_iterable: MakeIterable, count: CountItems, warmup_items: int, max_items: int | None) -> Measurement:
    start = time.perf_counter()
    iterable = make_iterable()
    iterator = iter(iterable)
    try:
        skipped = 0
        for item in _take_while_below(iterator, warmup_items, count):
            skipped += count(item)
        if warmup_items > 0:
            start = time.perf_counter()
        items = 0
        for item in iterator:
            items += count(item)
            if max_items is not None and items >= max_items:
                break
        return Measurement(items, time.perf_counter() - start)
    finally:
        _close(iterator)
        _close(iterable)


def _take_while_below(iterator: Any, limit: int, count: CountItems) -> Iterable[Any]:
    taken = 0
    while taken < limit:
        try:
            item = next(iterator)
        except StopIteration:
            return
        taken += count(item)
        yield item


def _close(obj: Any) -> None:
    close = getattr(obj, "close", None)
    if callable(close):
        close()


@dataclass(frozen=True)
class Comparison:
    """A candidate against its baseline, measured in interleaved rounds of one run."""

    name: str
    baseline_name: str
    baseline_ips: float
    candidate_ips: float
    ratio: float
    ratio_min: float
    ratio_max: float
    rounds: int                     # rounds measured (fewer than planned once the verdict was settled)
    cores: int
    unit: str = "items"
    target: float | None = None
    free_cores: float | None = None  # measured in the same run, where the target depends on cores
    ceiling: float | None = None     # the median ratio of `compare`'s `ceiling` to the baseline, where one was given
    rounds_planned: int | None = None

    @property
    def passed(self) -> bool | None:
        return None if self.target is None else self.ratio >= self.target

    HEADER = (f"{'candidate':<28} {'throughput':>12} {'baseline':>12} {'ratio':>7} {'spread':>12} {'target':>7} "
              f"{'cores':>13}")

    def row(self) -> str:
        """One table line: throughputs in items/s, ratio, its spread over rounds, target, cores (and free ones)."""
        target = "-" if self.target is None else f"{self.target:.2f}x"
        spread = f"{self.ratio_min:.2f}-{self.ratio_max:.2f}x"
        cores = f"{self.cores}" if self.free_cores is None else f"{self.cores} ({self.free_cores:.1f} free)"
        return (
            f"{self.name[:28]:<28} {self.candidate_ips:>10.1f}/s {self.baseline_ips:>10.1f}/s "
            f"{self.ratio:>6.2f}x {spread:>12} {target:>7} {cores:>13}"
        )

    def __str__(self) -> str:
        return f"{self.HEADER}\n{self.row()}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"passed": self.passed}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())


def verdict_settled(ratios: list[float], rounds: int, target: float | None) -> bool:
    """Whether the median of `rounds` ratios falls on one side of `target` whatever the rounds still to come give.

    With an odd number of rounds the median is the middle ratio: once more than half of them are
    at or above the target, the median is too (and likewise below). Even counts average two
    middle ratios, so they are never settled early.
    """
    if target is None or rounds % 2 == 0:
        return False
    majority = rounds // 2 + 1
    at_or_above = sum(ratio >= target for ratio in ratios)
    return at_or_above >= majority or len(ratios) - at_or_above >= majority


def compare(
    baseline: MakeIterable,
    candidate: MakeIterable,
    *,
    rounds: int = 5,
    warmup_rounds: int = 1,
    name: str = "candidate",
    baseline_name: str = "baseline",
    target: float | None = None,
    target_for_free_cores: Callable[[float], float] | None = None,
    ceiling: MakeIterable | None = None,
    target_for_ceiling: Callable[[float], float] | None = None,
    unit: str = "items",
    **measure_kwargs: Any,
) -> Comparison:
    """Run baseline and candidate alternately and summarise by the median ratio.

    Each round measures the baseline, then the candidate (`measure_kwargs` go to
    both), and keeps candidate/baseline throughput. `warmup_rounds` rounds run
    first and are discarded (page cache, imports, JIT-like warm-ups). With a target,
    rounds stop once the verdict is settled (`verdict_settled`): the pass or fail is
    the one all `rounds` would give, and the figures are those of the rounds measured.

    Where the gain depends on cores, give `target_for_free_cores` instead of `target`: the
    cores free for work are measured before and after the rounds (`machine.free_cores`),
    and the target is that function of the lower figure, so a busy machine asks less.

    Where the gain is bounded by what the machine gives this very work, give `ceiling` (a plain way of doing the
    candidate's work) and `target_for_ceiling` instead: each round measures the ceiling too, after the candidate,
    and the target is that function of the median of its ratios to the baseline. All rounds then run.
    """
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    if (ceiling is None) != (target_for_ceiling is None):
        raise ValueError("give ceiling and target_for_ceiling together")
    free = free_cores() if target_for_free_cores else None
    if target_for_free_cores and free is not None:
        target = target_for_free_cores(free)
    for _ in range(warmup_rounds):
        measure(baseline, **measure_kwargs)
        measure(candidate, **measure_kwargs)
        if ceiling is not None:
            measure(ceiling, **measure_kwargs)
    base_ips: list[float] = []
    cand_ips: list[float] = []
    ratios: list[float] = []
    ceiling_ratios: list[float] = []
    while len(ratios) < rounds:
        base = measure(baseline, **measure_kwargs).items_per_s
        cand = measure(candidate, **measure_kwargs).items_per_s
        base_ips.append(base)
        cand_ips.append(cand)
        ratios.append(cand / base if base > 0 else float("inf"))
        if ceiling is not None:
            top = measure(ceiling, **measure_kwargs).items_per_s
            ceiling_ratios.append(top / base if base > 0 else float("inf"))
            continue
        if len(ratios) < rounds and not verdict_settled(ratios, rounds, target):
            continue
        if target_for_free_cores and free is not None:
            # The lower of the before and after figures sets the target; a lower target can
            # unsettle a failing verdict, and then the remaining rounds run after all.
            free = min(free, free_cores())
            target = target_for_free_cores(free)
        if len(ratios) == rounds or verdict_settled(ratios, rounds, target):
            break
    if target_for_ceiling is not None:
        target = target_for_ceiling(statistics.median(ceiling_ratios))
    return Comparison(
        name=name,
        baseline_name=baseline_name,
        baseline_ips=statistics.median(base_ips),
        candidate_ips=statistics.median(cand_ips),
        ratio=statistics.median(ratios),
        ratio_min=min(ratios),
        ratio_max=max(ratios),
        rounds=len(ratios),
        cores=usable_cores(),
        unit=unit,
        target=target,
        free_cores=free,
        ceiling=statistics.median(ceiling_ratios) if ceiling_ratios else None,
        rounds_planned=rounds,
    )
