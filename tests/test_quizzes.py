"""The quizzes (`make quiz M=04`, grader/quiz.py) cannot be passed by the shape of their choices, and stopping one
at a prompt (Ctrl-D, Ctrl-C) ends it without a traceback."""

from __future__ import annotations

import math
import subprocess
import sys
from collections import Counter

import pytest

from grader import quiz
from loaderlab.paths import REPO_ROOT


def _right_is(question: quiz.Question, pick: type[max] | type[min]) -> bool:
    """Whether the right choice is the longest (pick=max) or the shortest (pick=min), ties counting as clues."""
    right = len(question.choices[question.answer - 1])
    others = [len(c) for number, c in enumerate(question.choices, 1) if number != question.answer]
    return pick(right, *others) == right


@pytest.mark.parametrize("module", quiz.modules())
def test_neither_the_longest_nor_the_shortest_choice_gives_the_answer_away(module: str) -> None:
    questions = quiz.load(module).questions
    most = math.ceil(len(questions) / 3)
    for pick, word in ((max, "longest"), (min, "shortest")):
        given_away = [number for number, q in enumerate(questions, 1) if _right_is(q, pick)]
        assert len(given_away) <= most, (f"quiz {module}: the right answer is the {word} choice in questions "
                                         f"{given_away}; 'pick the {word}' must not pass (at most {most})")


@pytest.mark.parametrize("module", quiz.modules())
def test_the_right_answers_move_between_positions(module: str) -> None:
    positions = Counter(q.answer for q in quiz.load(module).questions)
    assert len(positions) >= 3 and max(positions.values()) <= math.ceil(sum(positions.values()) / 2), (
        f"quiz {module}: right answers at positions {dict(positions)}")


@pytest.mark.parametrize("typed", ["", "1\n2\n"], ids=["at_once", "after_two_answers"])
def test_ctrl_d_at_a_prompt_stops_the_quiz_without_a_traceback(typed: str) -> None:
    done = subprocess.run([sys.executable, "-m", "grader.quiz", "04"], input=typed, capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=60)
    assert "Traceback" not in done.stderr and done.returncode == 1, done.stderr
    assert "quiz stopped" in done.stdout
