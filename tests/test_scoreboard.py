"""The instructor's scoreboard (`make scoreboard DIR=...`, grader.collect): hostile results files are refused or
escaped wherever their values land, and the page is a compact status grid that a real browser shows as one.

Every value in a learner's results file is untrusted input to the instructor's browser. The browser-free tests
parse the page's markup; the browser test opens it in headless Chromium where one is installed (skipped, saying
why, where not).
"""

from __future__ import annotations

import html
import json
import re
import unicodedata
from html.parser import HTMLParser
from pathlib import Path

import pytest

from grader import collect
from grader.catalog import exercise_names, find
from grader.results import (CORRECT_HERE, CORRECT_UNTIMED, DONE, ERROR, FAIL, NOT_STARTED, NOT_TIMED, PARTLY_RUN, PASS,
                            RESULTS_FORMAT, CheckResult, read_results, write_json)

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


def _file(folder: Path, name: str, payload: dict | str | bytes) -> Path:
    path = folder / f"{name}.json"
    if isinstance(payload, bytes):
        path.write_bytes(payload)
    else:
        path.write_text(payload if isinstance(payload, str) else json.dumps(payload))
    return path


def _valid(learner: object = "Ada", status: str = DONE, check_status: str = PASS, **check: object) -> dict:
    """A results file as the grader writes one (one exercise, one timed check), with the exercise's status, the
    learner's name, the check's status or the check's other fields replaced."""
    metrics = {"name": "reads", "candidate_ips": 30.0, "baseline_ips": 10.0, "ratio": 3.0, "target": 2.0, "cores": 2,
               "free_cores": 1.9, "passed": True}
    entry = {"exercise": "ex02_threaded_prefetch", "check": "io_reads_with_threads", "status": check_status,
             "metrics": metrics} | check
    return {"format": RESULTS_FORMAT, "learner": learner, "machine": {"usable_cores": 2},
            "exercises": {"ex02_threaded_prefetch": {"status": status, "checks": [entry]}}}


REFUSED = {
    "status_breaks_out_of_the_class_attribute": _valid(status='x" onmouseover="alert(1)'),
    "status_the_grader_never_writes": _valid(status="passed with honours"),
    "check_status_the_grader_never_writes": {"format": RESULTS_FORMAT, "exercises": {"ex02_threaded_prefetch": {
        "status": DONE, "checks": [{"check": "io_reads_with_threads", "status": "<b>pass</b>"}]}}},
    "a_checks_status_for_an_exercise": _valid(status=PASS),
    "an_exercises_status_for_a_check": _valid(status=FAIL, check_status=CORRECT_HERE),
    "older_format_with_a_status_no_grader_wrote": _valid(status="<b>pass</b>") | {"format": 2},
    "exercise_name_with_markup": {"format": RESULTS_FORMAT, "exercises": {"<script>alert(1)</script>": {"status": DONE}}},
    "check_name_with_markup": _valid(check='a" onclick="alert(1)'),
    "ratio_as_text": _valid(metrics={"ratio": "<b>9</b>"}),
    "ratio_not_a_number": _valid(metrics={"ratio": float("nan")}),
    "ratio_infinite": _valid(metrics={"ratio": float("inf")}),
    "ratio_as_a_boolean": _valid(metrics={"ratio": True}),
    "free_cores_as_text": _valid(metrics={"ratio": 2.0, "free_cores": "<i>1</i>"}),
    "passed_as_text": _valid(metrics={"ratio": 2.0, "passed": "<i>yes</i>"}),
    "cores_as_markup": _valid() | {"machine": {"usable_cores": "<b>64</b>"}},
    "learner_name_not_text": _valid(learner=["<b>"]),
    "entry_not_a_table": {"format": RESULTS_FORMAT, "exercises": {"ex02_threaded_prefetch": "<b>pass</b>"}},
    "a_format_no_grader_wrote": _valid() | {"format": 99},
}
# Files that fail to read at all: each is listed with its reason, and the room's page is still written.
UNREADABLE = {
    "nested_200000_deep": "[" * 200_000 + "]" * 200_000,  # json's reader raises RecursionError
    "larger_than_any_results_file": json.dumps(_valid() | {"padding": "x" * (collect.MAX_FILE_BYTES + 1)}),
    "not_text": b"\xff\xfe\x00garbage",
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
    write_json([CheckResult("ex11_training_script", find("ex11").checks[0].name, NOT_STARTED)], "exercises", path,
               "fork")
    assert read_results(path), "a file of the grader's own format"
    learners, problems = collect.gather([path])
    assert problems == [] and learners[0].statuses == {"ex02_threaded_prefetch": FAIL,
                                                       "ex11_training_script": NOT_STARTED}
    assert read_results(path)["format"] == RESULTS_FORMAT
    assert learners[0].ratios == {("ex02_threaded_prefetch", "io_reads_with_threads"): 7.0}


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_a_file_that_fails_to_read_is_reported_and_the_rest_collected(case: str, tmp_path: Path) -> None:
    room = tmp_path / "room"
    room.mkdir()
    bad = _file(room, case, UNREADABLE[case])
    _file(room, "ada", _valid())
    learners, problems = collect.gather([room])
    assert [learner.name for learner in learners] == ["Ada"]
    assert len(problems) == 1 and problems[0].startswith(f"{bad}: skipped, "), problems


# Names that GitHub-flavoured Markdown would make links of without brackets, and names holding Unicode format
# characters (category Cf: U+202E right-to-left override, U+2066/U+2069 an isolate, U+200B zero-width space) that
# reorder or hide what is shown.
LINKING_NAMES = ["see https://evil.example/x", "WWW.evil.example", "ada@evil.example", "ftp://evil.example"]
FORMATTED_NAMES = {"Ada \u202egnp.exe": "Ada gnp.exe", "\u2066Bo\u2069b\u200b": "Bob"}


def test_a_hostile_room_makes_a_page_without_injected_markup(tmp_path: Path) -> None:
    room = tmp_path / "room"
    room.mkdir()
    for case, payload in (REFUSED | UNREADABLE).items():
        _file(room, case, payload)
    names = HOSTILE_TEXT + LINKING_NAMES + list(FORMATTED_NAMES)
    for number, name in enumerate(names):  # a name is free text: accepted, and escaped
        _file(room, f"named-{number}", _valid(learner=name))
    out = tmp_path / "board"
    collect.main([str(room), "--out", str(out)])
    page, markdown = (out / "scoreboard.html").read_text(), (out / "scoreboard.md").read_text()
    markup = assert_only_the_pages_own_markup(page)
    text = "".join(markup.text)
    assert all(name[:collect.MAX_NAME] in text for name in HOSTILE_TEXT + LINKING_NAMES), "each name is shown, as text"
    assert all(shown in text for shown in FORMATTED_NAMES.values()), "a name is shown without its format characters"
    assert text.count("skipped, ") == len(REFUSED) + len(UNREADABLE), "each file left out is listed under Files skipped"
    assert "<" not in markdown and not re.search(r"(?<!\\)\]\(", markdown), "no raw HTML or link in the Markdown"
    names_md = [line for line in markdown.splitlines() if line.startswith("| ") and "learner" not in line]
    assert not re.search(r"(?i)://|www\.|@", "\n".join(names_md)), "a bare URL, www. or e-mail address: a link on GitHub"
    for output in (page, markdown):
        assert not [c for c in output if unicodedata.category(c) == "Cf"], "a format character reached the page"


def test_a_name_that_would_be_a_link_reads_the_same_in_rendered_markdown() -> None:
    """The autolink triggers are broken with a backslash escape or a character reference, which render as the same
    characters: CommonMark (markdown-it, bundled with Jupyter) shows the name as it was written."""
    from markdown_it import MarkdownIt

    for name in LINKING_NAMES:
        rendered = MarkdownIt("commonmark").render(collect.markdown_cell(name))
        assert html.unescape(re.sub(r"<[^>]+>", "", rendered)).strip() == name


def test_the_page_escapes_every_value_even_one_the_reader_would_refuse(tmp_path: Path) -> None:
    """Escaping does not rely on the reader's checks: a Learner built by hand with markup everywhere."""
    hostile = HOSTILE_TEXT[0]
    learner = collect.Learner(hostile, tmp_path / "x.json", cores=HOSTILE_TEXT[1],
                              statuses={f"ex01{HOSTILE_TEXT[3]}": hostile, "ex02_threaded_prefetch": DONE},
                              ratios={("ex02_threaded_prefetch", hostile): 2.0})
    board = collect.build([learner], [HOSTILE_TEXT[2]])
    assert_only_the_pages_own_markup(collect.page(board))


def _room(folder: Path, learners: int) -> None:
    """A room of results files written by the grader: each learner is done with a different number of exercises."""
    folder.mkdir(parents=True)
    names = exercise_names()
    for seat in range(learners):
        path = folder / f"seat-{seat}.json"
        for index, exercise in enumerate(names):
            status = PASS if index < seat + 2 else FAIL if index == seat + 2 else NOT_STARTED
            metrics = ({"name": "x", "candidate_ips": 20.0 + seat, "baseline_ips": 10.0, "ratio": 2.0 + seat / 10,
                        "target": 1.5, "cores": 2, "free_cores": 1.9, "passed": True}
                       if status == PASS and index < 3 else None)
            write_json([CheckResult(exercise, check.name, status, metrics=metrics if check.timed else None,
                                    timed=check.timed) for check in find(exercise).checks], "exercises", path, "fork")
        payload = json.loads(path.read_text())
        payload["learner"] = f"Learner number {seat} with a rather long name"
        path.write_text(json.dumps(payload))
    _file(folder, "untimed", _valid(learner="Ulla", status=CORRECT_UNTIMED) | {"exercises": {
        "ex03_process_loader": {"status": CORRECT_UNTIMED, "checks": []},
        "ex04_fast_dataloader": {"status": NOT_TIMED, "checks": []},
        "ex09_device_prefetcher": {"status": CORRECT_HERE, "checks": []}}})


def test_the_page_is_a_grid_with_a_progress_bar_per_learner(tmp_path: Path) -> None:
    _room(tmp_path / "room", 5)
    learners, problems = collect.gather([tmp_path / "room"])
    page = collect.page(collect.build(learners, problems))
    markup = assert_only_the_pages_own_markup(page)
    cells = [attrs for tag, attrs in markup.tags if tag == "td" and "s" in (attrs.get("class") or "").split()]
    assert len(cells) == 6 * len(exercise_names()), "one coloured cell per learner and exercise"
    bars = [attrs for tag, attrs in markup.tags if tag == "span" and attrs.get("class") == "bar"]
    assert [bar["aria-label"] for bar in bars][:2] == [f"2 of {len(exercise_names())} done",
                                                       f"3 of {len(exercise_names())} done"]
    assert "2 correct but not all graded" in bars[-1]["aria-label"]
    headers = [attrs.get("title") for tag, attrs in markup.tags if tag == "th"]
    assert all(name in headers for name in exercise_names()), "a short column label carries its full name"


def test_every_status_the_grader_writes_has_its_look_and_a_key() -> None:
    from grader.results import GROUP_STATUSES

    assert set(GROUP_STATUSES) <= set(collect.STATUS_LOOK), "an exercise's status the grid would show as not graded"
    key = collect.markdown(collect.build([], []))
    assert all(status in key for status in GROUP_STATUSES), "the key names every status"


def test_an_older_results_file_is_read_by_todays_rules(tmp_path: Path) -> None:
    """Format 2 saved no skipped check and called ex09 "pass" on a CPU: its exercise status is recomputed from the
    checks saved, so a grade that left the GPU checks out reads "passed what ran", never "done"."""
    ex09 = find("ex09")
    checks = [{"check": c.name, "status": PASS} for c in ex09.checks if not c.cuda_only]
    old = {"format": 2, "learner": "Old", "exercises": {ex09.name: {"status": "pass", "checks": checks}}}
    learners, problems = collect.gather([_file(tmp_path, "old", old)])
    assert problems == [] and learners[0].statuses == {ex09.name: PARTLY_RUN}
    assert read_results(tmp_path / "old.json")["exercises"][ex09.name]["status"] == PARTLY_RUN


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
