"""The quizzes (`make quiz M=04`, grader/quiz.py) cannot be passed by the shape of their choices, name only what
exists, and stopping one at a prompt (Ctrl-D, Ctrl-C) ends it without a traceback.

The shape of the choices: a guesser who never reads a question picks by length (the longest choice, the second-longest,
the second-shortest, the shortest) or by position (the first, second, third or last). Each such guess must score near
chance, 1/k on a question of k choices. Its score is counted with ties shared: where t choices have the length it
picks, it picks one of them at random and scores 1/t if the right one is among them.

How the bounds were chosen: a guess's score on n questions has, for a random arrangement (the right answer's length
rank and position drawn uniformly), the mean sum(1/k) and the standard deviation sqrt(sum(1/k * (1 - 1/k))). Every check
allows SPREAD = 3 of those deviations: over all 67 questions, the 31 with three choices and the 36 with four, in both
directions (a choice that is never right is a cue too), and in each quiz above chance only (6 to 9 questions cannot
show much below it). In 20,000 simulated random arrangements of these quizzes, each single check failed in at most
0.55% of them, and all of them passed together in 81% (so one random arrangement in five would need rearranging: the
arrangement is the author's, not chance's). The quizzes of 2026-11-28 failed these checks: the second-longest choice
was right in 36.5 of 67 questions against a chance of 19.3 (+4.6 deviations), the middle of three in 23 of 31 against
10.3 (+4.8), the shortest in 6.5 of 67 (-3.5), and in quiz 02 the second-shortest in 5 of 6 against 1.5 (+3.3).

Throwaway choices: no choice is shorter than SHORTEST_SHARE of its question's longest choice. Those quizzes had 23
questions with such a stub ("A hang at item 7.", "It makes the copy faster"), wrong in 20 of them: a guesser struck
it out and chose between the others.
"""

from __future__ import annotations

import importlib
import math
import re
import subprocess
import sys
from collections.abc import Callable

import pytest

from grader import quiz
from loaderlab.paths import REPO_ROOT

SPREAD = 3.0          # standard deviations of a random arrangement's score that a guess may stray from chance
SHORTEST_SHARE = 0.6  # no choice shorter than this share of the longest choice of its question

# A guess: for a question of k choices, ("length", r) picks the r-th longest choice, ("position", p) the p-th one.
GUESSES: dict[str, Callable[[int], tuple[str, int]]] = {
    "the longest choice": lambda k: ("length", 1),
    "the second-longest choice": lambda k: ("length", 2),
    "the second-shortest choice": lambda k: ("length", k - 1),
    "the shortest choice": lambda k: ("length", k),
    "the first choice": lambda k: ("position", 1),
    "the second choice": lambda k: ("position", 2),
    "the third choice": lambda k: ("position", 3),
    "the last choice": lambda k: ("position", k),
}
QUESTIONS = {module: quiz.load(module).questions for module in quiz.modules()}
EVERY_QUESTION = [q for questions in QUESTIONS.values() for q in questions]
GROUPS = {"all questions": EVERY_QUESTION,
          "the three-choice questions": [q for q in EVERY_QUESTION if len(q.choices) == 3],
          "the four-choice questions": [q for q in EVERY_QUESTION if len(q.choices) == 4]}


def score(question: quiz.Question, guess: str) -> float:
    """What `guess` scores on `question`, ties shared (see the module's docstring)."""
    kind, rank = GUESSES[guess](len(question.choices))
    if kind == "position":
        return float(rank == question.answer)
    lengths = [len(choice) for choice in question.choices]
    picked = sorted(lengths, reverse=True)[rank - 1]
    tied = [number for number, length in enumerate(lengths, 1) if length == picked]
    return 1 / len(tied) if question.answer in tied else 0.0


def chance(questions: list[quiz.Question]) -> tuple[float, float]:
    """A random arrangement's mean score over `questions` for any one guess, and its standard deviation."""
    shares = [1 / len(q.choices) for q in questions]
    return sum(shares), math.sqrt(sum(share * (1 - share) for share in shares))


def strays(questions: list[quiz.Question], above_only: bool) -> list[str]:
    """The guesses whose score over `questions` strays more than SPREAD deviations from chance, described."""
    mean, deviation = chance(questions)
    found = []
    for guess in GUESSES:
        got = sum(score(q, guess) for q in questions)
        if got - mean > SPREAD * deviation or (not above_only and mean - got > SPREAD * deviation):
            found.append(f"{guess} is right in {got:g} of {len(questions)} (chance {mean:.1f}, "
                         f"{(got - mean) / deviation:+.1f} deviations)")
    return found


@pytest.mark.parametrize("module", quiz.modules())
def test_no_guess_by_length_or_position_beats_chance_in_a_quiz(module: str) -> None:
    found = strays(QUESTIONS[module], above_only=True)
    assert not found, f"quiz {module}: " + "; ".join(found)


@pytest.mark.parametrize("group", GROUPS)
def test_no_guess_by_length_or_position_strays_from_chance_over_the_quizzes(group: str) -> None:
    found = strays(GROUPS[group], above_only=False)
    assert not found, f"over {group}: " + "; ".join(found)


def test_a_guess_that_gives_the_answer_away_is_caught() -> None:
    """The check itself: the middle choice of three right every time, or the first choice every time, fails it."""
    middle = [quiz.Question("q", ["a" * 100, "b" * 80, "c" * 90], 3, "") for _ in range(8)]
    assert any("second-longest" in found for found in strays(middle, above_only=True))
    first = [quiz.Question("q", ["a" * 90, "b" * 100, "c" * 80], 1, "") for _ in range(8)]
    assert any("the first choice" in found for found in strays(first, above_only=True))
    never_shortest = [quiz.Question("q", ["a" * 100, "b" * 90, "c" * 80, "d" * 70][:k], 1 + n % (k - 1), "")
                      for n, k in enumerate([3, 4] * 34)]
    assert any("shortest" in found for found in strays(never_shortest, above_only=False))


@pytest.mark.parametrize("module", quiz.modules())
def test_no_choice_is_a_throwaway_stub(module: str) -> None:
    stubs = [f"question {number}, choice {choice_number} ({len(choice)} characters against {longest})"
             for number, q in enumerate(QUESTIONS[module], 1) for longest in [max(len(c) for c in q.choices)]
             for choice_number, choice in enumerate(q.choices, 1) if len(choice) < SHORTEST_SHARE * longest]
    assert not stubs, f"quiz {module}: choices under {SHORTEST_SHARE:.0%} of their question's longest: {stubs}"


@pytest.mark.parametrize("module", quiz.modules())
def test_every_course_name_a_quiz_gives_exists_where_it_says(module: str) -> None:
    """Quiz 07 named loaderlab.device.crop_flip_batch, which lives in loaderlab.lessons.m07_device."""
    texts = [text for q in QUESTIONS[module] for text in (q.text, q.why, *q.choices)]
    for dotted in {name for text in texts for name in re.findall(r"\bloaderlab(?:\.\w+)+", text)}:
        parts = dotted.split(".")
        for split in range(len(parts), 0, -1):  # the longest importable module, then attributes
            try:
                target = importlib.import_module(".".join(parts[:split]))
            except ImportError:
                continue
            for attribute in parts[split:]:
                assert hasattr(target, attribute), f"quiz {module} names {dotted}: no {attribute!r} in {target!r}"
                target = getattr(target, attribute)
            break


@pytest.mark.parametrize("typed", ["", "1\n2\n"], ids=["at_once", "after_two_answers"])
def test_ctrl_d_at_a_prompt_stops_the_quiz_without_a_traceback(typed: str) -> None:
    done = subprocess.run([sys.executable, "-m", "grader.quiz", "04"], input=typed, capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=60)
    assert "Traceback" not in done.stderr and done.returncode == 1, done.stderr
    assert "quiz stopped" in done.stdout
