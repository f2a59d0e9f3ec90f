"""Module 03 (processes): the seeding rule with its epoch, the graded steps of exercise 03 (a learner can stop after
step 1 and the later steps read "not started"), hints for every check, and the notebook helpers."""

from __future__ import annotations

import importlib
import inspect
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from grader import catalog
from grader.checks import ex03_process_loader as checks
from grader.results import FAIL, NOT_STARTED, PASS
from grader.runner import run_check
from loaderlab.paths import REPO_ROOT
from loaderlab.lessons.m03_processes import traced_map
from solutions import ex03_process_loader as solution

EXERCISE = "ex03_process_loader"
STUB = REPO_ROOT / "exercises" / f"{EXERCISE}.py"


def _draw(generator: np.random.Generator) -> bytes:
    return generator.integers(0, 256, size=(8, 3), dtype=np.uint8).tobytes()


# ---- the seeding erratum: sample i of epoch e is np.random.default_rng([seed, epoch, i]) ----------------

def test_each_sample_is_seeded_with_seed_epoch_and_index() -> None:
    for seed, epoch, index in [(1234, 0, 0), (1234, 1, 7), (0, 5, 3)]:
        assert _draw(solution.sample_rng(seed, epoch, index)) == _draw(np.random.default_rng([seed, epoch, index]))


def test_the_old_rule_repeats_every_epoch_and_the_new_one_does_not() -> None:
    """The rule before the erratum, default_rng([seed, i]), gives every epoch the same draws; it must not be the rule."""
    old = [_draw(np.random.default_rng([checks.SEED, i])) for i in range(6)]
    epoch_0 = checks._draws(lambda i: [checks.SEED, 0, i], 6)
    epoch_1 = checks._draws(lambda i: [checks.SEED, 1, i], 6)
    assert all(a != b for a, b in zip(epoch_0, epoch_1)), "epochs 0 and 1 must give every sample a different draw"
    assert old != epoch_0 and old != epoch_1, "the grader's rule must not be the old default_rng([seed, i])"
    assert [_draw(solution.sample_rng(checks.SEED, 1, i)) for i in range(6)] != old
    assert "the epoch is missing" in checks._wrong_seeding(old, 1)


def test_grader_reference_follows_the_epoch() -> None:
    samples = checks.dataset_samples("train", 3)
    stamps = {epoch: [image[0, :8].tobytes() for image in checks._expected(samples, checks._stamp_draws, epoch=epoch)]
              for epoch in (0, 1)}
    assert stamps[1] == checks._draws(lambda i: [checks.SEED, 1, i], 3)
    assert stamps[0] != stamps[1]


def test_the_epoch_check_rejects_the_old_solution() -> None:
    """The pre-erratum solution's draws (planted folder) fail the epoch check, naming the missing epoch."""
    result = run_check(REPO_ROOT / "tests" / "planted" / "ex03_same_augmentation_every_epoch", EXERCISE,
                       "augmentations_change_every_epoch", timeout_s=90)
    assert result.status == FAIL, result.explain()
    assert "repeat every epoch" in result.message and "[seed, i]" in result.message, result.message


def test_a_dead_pool_worker_in_the_standard_librarys_words_counts_as_reported() -> None:
    message = ("BrokenProcessPool: A process in the process pool was terminated abruptly while the future was running "
               "or pending.").lower()
    assert any(word in message for word in checks.DEATH_WORDS)
    assert not any(word in "valueerror: planted failure in the transform" for word in checks.DEATH_WORDS)


# ---- graded steps --------------------------------------------------------------------------------------

def test_only_the_last_step_is_timed_and_step_titles_fit_the_summary_table() -> None:
    steps = catalog.find(EXERCISE).steps()
    assert [number for number, _, _ in steps] == list(range(1, 7))
    for number, title, members in steps:
        assert all(check.timed == (number == 6) for check in members), f"step {number}: only the last step (speed) is timed"
        assert len(f"step {number}: {title}") <= 28, "step titles must fit the summary table"


def test_each_step_helper_of_the_stub_raises_its_todo() -> None:
    stub = importlib.import_module("exercises.ex03_process_loader")
    for number, (helper, arguments) in checks.STEP_TODOS.items():
        with pytest.raises(NotImplementedError, match=rf"TODO\(ex03, step {number}\)"):
            getattr(stub, helper)(*arguments())


def test_the_solution_implements_every_step_helper() -> None:
    for helper, arguments in checks.STEP_TODOS.values():
        getattr(solution, helper)(*arguments())
    assert solution.describe_exit(-9) == "signal SIGKILL (exit code -9)"


def test_the_stub_keeps_the_public_names_and_the_epoch_argument() -> None:
    stub = importlib.import_module("exercises.ex03_process_loader")
    for module in (stub, solution):
        for name in ("ProcessLoader", "random_flip_and_jitter", "IMAGE_SHAPE", "Transform"):
            assert hasattr(module, name), f"{module.__name__} lost {name}"
        epoch = inspect.signature(module.ProcessLoader).parameters["epoch"]
        assert epoch.default == 0 and epoch.kind is inspect.Parameter.KEYWORD_ONLY


# A learner who stopped after step 1: pixels pickled back, any generator, a plain close(); steps 2-5 untouched.
STEP_1_ONLY = '''
import multiprocessing

import numpy as np

from exercises.ex03_process_loader import (IMAGE_SHAPE, Transform, describe_exit, random_flip_and_jitter,  # noqa: F401
                                           sample_rng, slot_array, stop_processes)
from loaderlab.images import reference_crop


def work(samples, transform, pipe):
    while (task := pipe.recv()) is not None:
        start, stop = task
        images = np.stack([transform(reference_crop(samples[i].path), np.random.default_rng())
                           for i in range(start, stop)])
        pipe.send((images, np.array([samples[i].label for i in range(start, stop)], dtype=np.int64)))


class ProcessLoader:
    def __init__(self, samples, transform, batch_size, num_workers, seed, timeout_s=60.0, start_method=None,
                 prefetch=2, *, epoch=0):
        self._batches = [(s, min(s + batch_size, len(samples))) for s in range(0, len(samples), batch_size)]
        self._in_flight, self._timeout_s = num_workers * prefetch, timeout_s
        self._next = self._sent = 0
        self._closed = False
        context = multiprocessing.get_context(start_method)
        self._pipes, self._workers = [], []
        for _ in range(num_workers):
            parent, child = context.Pipe()
            process = context.Process(target=work, args=(list(samples), transform, child), daemon=True)
            process.start()
            child.close()
            self._pipes.append(parent)
            self._workers.append(process)
        self._send()

    def _send(self):
        while self._sent < len(self._batches) and self._sent < self._next + self._in_flight:
            self._pipes[self._sent % len(self._pipes)].send(self._batches[self._sent])
            self._sent += 1

    def __iter__(self):
        return self

    def __next__(self):
        if self._next >= len(self._batches):
            self.close()
            raise StopIteration
        pipe = self._pipes[self._next % len(self._pipes)]
        if not pipe.poll(self._timeout_s):
            raise TimeoutError("no batch")
        images, labels = pipe.recv()
        self._next += 1
        self._send()
        return images, labels

    def close(self):
        if not self._closed:
            self._closed = True
            for pipe, process in zip(self._pipes, self._workers):
                pipe.send(None)
                process.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
'''


def test_a_learner_can_stop_after_step_1(tmp_path: Path) -> None:
    """Step 1's checks pass a loader that only does step 1; every later step reads "not started" with its TODO."""
    (tmp_path / f"{EXERCISE}.py").write_text(textwrap.dedent(STEP_1_ONLY))
    graded = {check.name: check.step for check in catalog.find(EXERCISE).checks}
    for check, number in graded.items():
        if number == 1:
            result = run_check(tmp_path, EXERCISE, check, timeout_s=120)
            assert result.status == PASS, result.explain()
    for number in (2, 3, 4, 5):
        for check in [c for c, n in graded.items() if n == number]:
            result = run_check(tmp_path, EXERCISE, check, timeout_s=60)
            assert result.status == NOT_STARTED and f"TODO(ex03, step {number})" in result.message, result.explain()


# ---- notebook helpers --------------------------------------------------------------------------------------

def _double(x: int) -> int:
    return 2 * x


def test_traced_map_returns_results_in_order_with_a_span_per_item() -> None:
    with ThreadPoolExecutor(2, thread_name_prefix="lane") as pool:
        results, tracer = traced_map(pool, _double, range(6), stage="decode")
    assert results == [0, 2, 4, 6, 8, 10]
    assert len(tracer.spans) == 6 and all(s.name == "decode" and s.lane.startswith("lane") for s in tracer.spans)
