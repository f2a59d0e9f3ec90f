"""The instructor's scoreboard (`make scoreboard DIR=...`, grader.collect): hostile results files are refused or
escaped wherever their values land, and the page is a compact status grid that a real browser shows as one.

Every value in a learner's results file is untrusted input to the instructor's browser. The browser-free tests
parse the page's markup; the browser test opens it in headless Chromium where one is installed (skipped, saying
why, where not).
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from grader import collect
from grader.catalog import exercise_names
from grader.results import (CORRECT_UNTIMED, ERROR, FAIL, NOT_STARTED, NOT_TIMED, PASS, CheckResult, read_results,
                            write_json)

# Markup the page itself writes; anything else in it came from a learner's file.
PAGE_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "table", "thead", "tbody", "tfoot",
             "tr", "th", "td", "span", "small", "ul", "li"}
PAGE_ATTRIBUTES = {"lang", "charset", "class", "title", "scope", "role", "aria-label", "style"}
PAGE_CLASSES = {"grid", "s", "pass", "correct", "untimed", "fail", "idle", "none", "bar", "progress", "v", "r", "met",
                "below", "outlier", "legend", "key"}
BAR_STYLE = re.compile(r"width:\d+(\.\d)?%")

HOSTILE_TEXT = ['x" onmouseover="alert(1)', "<img src=x onerror=\"document.title='pwned'\">",
                "[click me](javascript:alert(1))", "</td></tr></table><script>alert(1)</script>"]


class Markup(HTMLParser):
    """Every tag, attribute and piece of text of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parsed(page: str) -> Markup:
    markup = Markup()
    markup.feed(page)
    markup.close()
    return markup


def assert_only_the_pages_own_markup(page: str) -> Markup:
    markup = parsed(page)
    for tag, attrs in markup.tags:
        assert tag in PAGE_TAGS, f"<{tag}> is not markup the scoreboard writes: injected"
        assert set(attrs) <= PAGE_ATTRIBUTES, f"<{tag}> has attributes {sorted(set(attrs) - PAGE_ATTRIBUTES)}"
        assert not set((attrs.get("class") or "").split()) - PAGE_CLASSES, f"<{tag} class={attrs['class']!r}>"
        assert attrs.get("style") is None or BAR_STYLE.fullmatch(attrs["style"]), f"<{tag} style={attrs['style']!r}>"
    return markup


def _file(folder: Path, name: str, payload: dict) -> Path:
    path = folder / f"{name}.json"
    path.write_text(json.dumps(payload))
    return path


def _valid(learner: object = "Ada", status: str = PASS, **check: object) -> dict:
    """A results file as the grader writes one (one exercise, one timed check), with the exercise's status, the
    learner's name or the check's fields replaced."""
    metrics = {"name": "reads", "candidate_ips": 30.0, "baseline_ips": 10.0, "ratio": 3.0, "target": 2.0, "cores": 2,
               "free_cores": 1.9, "passed": True}
    entry = {"exercise": "ex02_threaded_prefetch", "check": "io_reads_with_threads", "status": PASS,
             "metrics": metrics} | check
    return {"format": 2, "learner": learner, "machine": {"usable_cores": 2},
            "exercises": {"ex02_threaded_prefetch": {"status": status, "checks": [entry]}}}


REFUSED = {
    "status_breaks_out_of_the_class_attribute": _valid(status='x" onmouseover="alert(1)'),
    "status_the_grader_never_writes": _valid(status="passed with honours"),
    "check_status_the_grader_never_writes": {"format": 2, "exercises": {"ex02_threaded_prefetch": {
        "status": PASS, "checks": [{"check": "io_reads_with_threads", "status": "<b>pass</b>"}]}}},
    "exercise_name_with_markup": {"format": 2, "exercises": {"<script>alert(1)</script>": {"status": PASS}}},
    "check_name_with_markup": _valid(check='a" onclick="alert(1)'),
    "ratio_as_text": _valid(metrics={"ratio": "<b>9</b>"}),
    "ratio_not_a_number": _valid(metrics={"ratio": float("nan")}),
    "ratio_infinite": _valid(metrics={"ratio": float("inf")}),
    "ratio_as_a_boolean": _valid(metrics={"ratio": True}),
    "free_cores_as_text": _valid(metrics={"ratio": 2.0, "free_cores": "<i>1</i>"}),
    "passed_as_text": _valid(metrics={"ratio": 2.0, "passed": "<i>yes</i>"}),
    "cores_as_markup": _valid() | {"machine": {"usable_cores": "<b>64</b>"}},
    "learner_name_not_text": _valid(learner=["<b>"]),
    "entry_not_a_table": {"format": 2, "exercises": {"ex02_threaded_prefetch": "<b>pass</b>"}},
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_file_with_a_value_the_grader_never_writes_is_reported_and_skipped(case: str, tmp_path: Path) -> None:
    path = _file(tmp_path, case, REFUSED[case])
    learners, problems = collect.gather([path])
    assert learners == [] and len(problems) == 1 and problems[0].startswith(f"{path}: skipped, ")


def test_the_files_the_grader_writes_are_read(tmp_path: Path) -> None:
    path = tmp_path / "ada.json"
    metrics = {"name": "8 threads", "candidate_ips": 70.0, "baseline_ips": 10.0, "ratio": 7.0, "target": 3.0,
               "cores": 2, "free_cores": None, "passed": True}
    write_json([CheckResult("ex02_threaded_prefetch", "io_reads_with_threads", PASS, metrics=metrics, timed=True),
                CheckResult("ex02_threaded_prefetch", "prefetch_overlaps_compute", ERROR, "boom")], "exercises",
               path, "fork")
    write_json([CheckResult("ex11_training_script", "every_batch_once", NOT_STARTED)], "exercises", path, "fork")
    assert read_results(path), "a file of the grader's own format"
    learners, problems = collect.gather([path])
    assert problems == [] and learners[0].statuses == {"ex02_threaded_prefetch": FAIL,
                                                       "ex11_training_script": NOT_STARTED}
    assert learners[0].ratios == {("ex02_threaded_prefetch", "io_reads_with_threads"): 7.0}


def test_a_hostile_room_makes_a_page_without_injected_markup(tmp_path: Path) -> None:
    room = tmp_path / "room"
    room.mkdir()
    for case, payload in REFUSED.items():
        _file(room, case, payload)
    for number, name in enumerate(HOSTILE_TEXT):  # a name is free text: accepted, and escaped
        _file(room, f"named-{number}", _valid(learner=name))
    out = tmp_path / "board"
    collect.main([str(room), "--out", str(out)])
    page, markdown = (out / "scoreboard.html").read_text(), (out / "scoreboard.md").read_text()
    markup = assert_only_the_pages_own_markup(page)
    text = "".join(markup.text)
    assert all(name[:collect.MAX_NAME] in text for name in HOSTILE_TEXT), "each hostile name is shown, as text"
    assert text.count("skipped, ") == len(REFUSED), "each refused file is listed under Files skipped"
    assert "<" not in markdown and not re.search(r"(?<!\\)\]\(", markdown), "no raw HTML or link in the Markdown"


def test_the_page_escapes_every_value_even_one_the_reader_would_refuse(tmp_path: Path) -> None:
    """Escaping does not rely on the reader's checks: a Learner built by hand with markup everywhere."""
    hostile = HOSTILE_TEXT[0]
    learner = collect.Learner(hostile, tmp_path / "x.json", cores=HOSTILE_TEXT[1],
                              statuses={f"ex01{HOSTILE_TEXT[3]}": hostile, "ex02_threaded_prefetch": PASS},
                              ratios={("ex02_threaded_prefetch", hostile): 2.0})
    board = collect.build([learner], [HOSTILE_TEXT[2]])
    assert_only_the_pages_own_markup(collect.page(board))


def _room(folder: Path, learners: int) -> None:
    """A room of results files written by the grader: each learner has passed a different number of exercises."""
    folder.mkdir(parents=True)
    names = exercise_names()
    for seat in range(learners):
        path = folder / f"seat-{seat}.json"
        for index, exercise in enumerate(names):
            status = PASS if index < seat + 2 else FAIL if index == seat + 2 else NOT_STARTED
            metrics = ({"name": "x", "candidate_ips": 20.0 + seat, "baseline_ips": 10.0, "ratio": 2.0 + seat / 10,
                        "target": 1.5, "cores": 2, "free_cores": 1.9, "passed": True}
                       if status == PASS and index < 3 else None)
            write_json([CheckResult(exercise, "some_check", status, metrics=metrics, timed=metrics is not None)],
                       "exercises", path, "fork")
        payload = json.loads(path.read_text())
        payload["learner"] = f"Learner number {seat} with a rather long name"
        path.write_text(json.dumps(payload))
    _file(folder, "untimed", _valid(learner="Ulla", status=CORRECT_UNTIMED) | {"exercises": {
        "ex03_process_loader": {"status": CORRECT_UNTIMED, "checks": []},
        "ex04_fast_dataloader": {"status": NOT_TIMED, "checks": []}}})


def test_the_page_is_a_grid_with_a_progress_bar_per_learner(tmp_path: Path) -> None:
    _room(tmp_path / "room", 5)
    learners, problems = collect.gather([tmp_path / "room"])
    page = collect.page(collect.build(learners, problems))
    markup = assert_only_the_pages_own_markup(page)
    cells = [attrs for tag, attrs in markup.tags if tag == "td" and "s" in (attrs.get("class") or "").split()]
    assert len(cells) == 6 * len(exercise_names()), "one coloured cell per learner and exercise"
    bars = [attrs for tag, attrs in markup.tags if tag == "span" and attrs.get("class") == "bar"]
    assert [bar["aria-label"] for bar in bars][:2] == [f"2 of {len(exercise_names())} passed",
                                                       f"3 of {len(exercise_names())} passed"]
    assert "correct but not timed" in bars[-1]["aria-label"]
    headers = [attrs.get("title") for tag, attrs in markup.tags if tag == "th"]
    assert all(name in headers for name in exercise_names()), "a short column label carries its full name"


def test_a_browser_shows_the_room_on_one_screen_and_runs_nothing_from_it(tmp_path: Path, headless_browser) -> None:
    room = tmp_path / "room"
    _room(room, 8)
    _file(room, "pwn", _valid(learner=HOSTILE_TEXT[1]))
    _file(room, "hover", _valid(status=HOSTILE_TEXT[0]))
    out = tmp_path / "board"
    collect.main([str(room), "--out", str(out)])
    page = out / "scoreboard.html"
    dom = headless_browser(page, screenshot=tmp_path / "scoreboard.png")
    assert "pwned" not in "".join(parsed(dom).text[:3]) and "<img" not in dom and "<script" not in dom
    assert_only_the_pages_own_markup(dom)
    assert (tmp_path / "scoreboard.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Measured in the browser: the page's width on a 1280-pixel screen (no sideways scrolling).
    probe = out / "probe.html"
    probe.write_text(page.read_text().replace(
        "</body>", "<script>document.title = 'width ' + document.documentElement.scrollWidth</script></body>"))
    width = int(re.search(r"<title>width (\d+)</title>", headless_browser(probe)).group(1))
    assert width <= 1280, f"the scoreboard of 9 learners is {width} px wide: it scrolls sideways on a 1280 px screen"
