"""Module 02 (threads): graded steps a learner can stop after, a stub that names its steps, a hint per check,
the quiz, and the notebook's stated running time."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from grader import catalog, quiz
from grader.results import NOT_STARTED, PASS
from grader.runner import run_check
from loaderlab.paths import REPO_ROOT

EXERCISE = "ex02_threaded_prefetch"
STUB = REPO_ROOT / "exercises" / f"{EXERCISE}.py"
NOTEBOOK = REPO_ROOT / "notebooks" / "02_threading.ipynb"


def test_the_stub_says_what_to_build_not_the_code() -> None:
    text = STUB.read_text()
    assert "queue.Queue(" not in text and "ThreadPoolExecutor(" not in text, "the stub says what to build, not the code"


STEP_1_ONLY = '''
import queue
import threading

_END = object()


def _produce(iterable, slots):
    for item in iterable:
        slots.put(item)
    slots.put(_END)


class ThreadedPrefetcher:
    def __init__(self, iterable, depth=2):
        self._slots = queue.Queue(maxsize=depth)
        self._ended = False
        self._thread = threading.Thread(target=_produce, args=(iterable, self._slots), daemon=True)
        self._thread.start()

    def __iter__(self):
        return self

    def __next__(self):
        if self._ended:
            raise StopIteration
        while True:
            try:
                entry = self._slots.get(timeout=0.05)
                break
            except queue.Empty:
                if not self._thread.is_alive() and self._slots.empty():
                    raise RuntimeError("the producer ended without an end marker") from None
        if entry is _END:
            self._ended = True
            raise StopIteration
        return entry

    def close(self):
        raise NotImplementedError("TODO(ex02, step 2) in exercises/ex02_threaded_prefetch.py: close")

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def threaded_map(fn, items, num_threads=8, max_in_flight=None):
    raise NotImplementedError("TODO(ex02, step 3) in exercises/ex02_threaded_prefetch.py: threaded_map")
'''

STEP_3_ONLY = '''
from concurrent.futures import ThreadPoolExecutor

from solutions.ex02_threaded_prefetch import ThreadedPrefetcher  # noqa: F401  (steps 1 and 2 done)


def threaded_map(fn, items, num_threads=8, max_in_flight=None):
    with ThreadPoolExecutor(max_workers=num_threads) as pool:
        futures = [pool.submit(fn, item) for item in items]  # in order, on threads, but no window yet
        for future in futures:
            yield future.result()
'''


@pytest.mark.parametrize("done, source", [(1, STEP_1_ONLY), (3, STEP_3_ONLY)], ids=["after step 1", "after step 3"])
def test_a_learner_can_stop_after_a_step(tmp_path: Path, done: int, source: str) -> None:
    """What a learner has after step N passes step N's checks, and the next step is not passed yet."""
    (tmp_path / f"{EXERCISE}.py").write_text(textwrap.dedent(source))
    steps = {check.name: check.step for check in catalog.find(EXERCISE).checks}
    for check in (c for c, number in steps.items() if number == done):
        result = run_check(tmp_path, EXERCISE, check, timeout_s=90)
        assert result.status == PASS, f"after step {done}, {check}: {result.explain()}"
    following = (run_check(tmp_path, EXERCISE, c, timeout_s=90) for c, number in steps.items() if number == done + 1)
    assert any(result.status != PASS for result in following), f"step {done + 1} passed an implementation that stops at step {done}"  # stops at the first
    if done == 1:
        result = run_check(tmp_path, EXERCISE, "threaded_map_keeps_order", timeout_s=60)
        assert result.status == NOT_STARTED and "step 3" in result.message, result.explain()


def test_quiz_02_is_answerable_from_the_notebook() -> None:
    module = quiz.load("02")
    assert 5 <= len(module.questions) <= 8
    assert all(quiz.grade(module, [q.answer for q in module.questions]))
    assert all(re.search(r"Section \d|notebook|Myths", q.why) for q in module.questions), "ground each answer in the notebook"


def test_notebook_02_states_its_running_time_and_checks_the_myths() -> None:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    opening = "".join(cells[0]["source"])
    assert "How long it takes" in opening and "TIMING" not in opening, "state the measured running time at the top"
    markdown = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert markdown.count("**Myth:") == 3
    code_lengths = [len("".join(c["source"]).splitlines()) for c in cells if c["cell_type"] == "code"]
    assert max(code_lengths) <= 60, "split long cells: one technique per cell"
