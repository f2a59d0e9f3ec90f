"""A short self-check quiz per module, answered and graded on your machine: `make quiz M=04`.

Each module's questions live in `grader/quizzes/<NN>.toml`:

    title = "Module 04: tuning the DataLoader"
    [[question]]
    text = "..."
    choices = ["...", "...", "..."]
    answer = 2            # the right choice, counted from 1
    why = "..."           # shown after the answer, with the measurement or the notebook section behind it

    python -m grader.quiz 04                  # asks each question, then shows the right answer and why
    python -m grader.quiz 04 --answers 2,1,3  # grades given answers without asking (for scripts and tests)
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from loaderlab.paths import GRADER_DIR

QUIZ_DIR = Path(__file__).with_name("quizzes")
SCORES_FILE = GRADER_DIR / "quizzes.json"


@dataclass(frozen=True)
class Question:
    text: str
    choices: list[str]
    answer: int  # counted from 1
    why: str


@dataclass(frozen=True)
class Quiz:
    module: str
    title: str
    questions: list[Question]


def modules() -> list[str]:
    """The modules that have a quiz, as two-digit strings."""
    return sorted(path.stem for path in QUIZ_DIR.glob("*.toml"))


def load(module: str) -> Quiz:
    """The quiz of `module` ("4", "04"), checked for shape; SystemExit naming the choices if there is none."""
    module = f"{int(module):02d}" if module.isdigit() else module
    path = QUIZ_DIR / f"{module}.toml"
    if not path.is_file():
        raise SystemExit(f"no quiz for module {module!r}; quizzes exist for modules {', '.join(modules())}")
    spec = tomllib.loads(path.read_text(encoding="utf-8"))
    questions = [Question(q["text"], list(q["choices"]), int(q["answer"]), q["why"]) for q in spec["question"]]
    for number, question in enumerate(questions, 1):
        if not 1 <= question.answer <= len(question.choices):
            raise ValueError(f"{path}: question {number}'s answer {question.answer} is not one of its choices")
    return Quiz(module, spec["title"], questions)


def grade(quiz: Quiz, answers: list[int]) -> list[bool]:
    """Whether each answer (counted from 1) is right; missing answers are wrong."""
    return [i < len(answers) and answers[i] == q.answer for i, q in enumerate(quiz.questions)]


def _ask(question: Question, number: int, total: int) -> int:
    print(f"\n{number}/{total}. {question.text}")
    for index, choice in enumerate(question.choices, 1):
        print(f"   {index}) {choice}")
    while True:
        reply = input(f"your answer (1-{len(question.choices)}): ").strip()
        if reply.isdigit() and 1 <= int(reply) <= len(question.choices):
            return int(reply)
        print("   please type the number of one choice")


def _save(quiz: Quiz, right: int) -> None:
    try:
        scores = json.loads(SCORES_FILE.read_text())
    except (OSError, ValueError):
        scores = {}
    scores[quiz.module] = {"title": quiz.title, "right": right, "of": len(quiz.questions)}
    SCORES_FILE.parent.mkdir(parents=True, exist_ok=True)
    SCORES_FILE.write_text(json.dumps(scores, indent=2))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.quiz", description=__doc__.splitlines()[0])
    parser.add_argument("module", help=f"module number, one of {', '.join(modules())}")
    parser.add_argument("--answers", help="comma-separated answers, counted from 1, instead of asking")
    args = parser.parse_args(argv)
    quiz = load(args.module)
    print(quiz.title)
    if args.answers is None:
        try:
            answers = [_ask(q, n, len(quiz.questions)) for n, q in enumerate(quiz.questions, 1)]
        except (EOFError, KeyboardInterrupt):  # Ctrl-D or Ctrl-C at a prompt: stop without a traceback
            print("\nquiz stopped before the last question; nothing graded or saved.")
            return 1
    else:
        answers = [int(a) for a in args.answers.split(",") if a.strip()]
    verdicts = grade(quiz, answers)
    for number, (question, right) in enumerate(zip(quiz.questions, verdicts), 1):
        mark = "right" if right else f"the answer is {question.answer}) {question.choices[question.answer - 1]}"
        print(f"\n{number}. {mark}\n   {question.why}")
    score = sum(verdicts)
    print(f"\n{score} of {len(quiz.questions)} right." + ("" if score == len(quiz.questions) else
          " Reread the sections behind the answers you missed, then try again."))
    _save(quiz, score)
    return 0 if score == len(quiz.questions) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
