"""Notebook 08's league section: your exercises in the league table (`league.table`) beside the course's
solutions of the same exercises, and what the leaders do that you did not.

`small_league` gates and times `NOTEBOOK_ENTRIES` (your exercises 01 (step 5), 04, 07 and 08, their solutions, the
tutorial DataLoader and the two decode-only ceilings). On `ci` it runs every entry in the calling process (`in_this_process`): a
fresh process per entry costs an interpreter and torch's or TensorFlow's import each, more than the whole league on
a few images. Elsewhere each entry runs in fresh processes, as `make league` does. `lessons` turns the result into
one line per exercise of yours.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from league import entries
from league import table as league

YOURS = {"yours-ex01": "ex01-threads", "yours-ex04": "ex04", "yours-ex07": "ex07",
         "yours-ex08": "ex08"}  # your entry -> the solution's entry
LESSONS = {
    "ex01-threads": "module 01, section 5: decode at the smallest power-of-two DCT scale, resize only the window",
    "ex04": "module 04: uint8 batches, a worker per core, JPEG draft decode",
    "ex07": "module 05: decode in parallel (AUTOTUNE) before the cache, batch, prefetch",
    "ex08": "module 06: whole tar shards read in order, shards split across the workers",
}
NOTEBOOK_ENTRIES = [*YOURS, *YOURS.values(), "tutorial", *(ceiling.name for ceiling in entries.CEILINGS)]
LEVEL = 0.9  # within 10% of the solution's median reads "level": one round on a busy machine moves that much


def in_this_process(entry: league.Entry, setup: league.Setup, mode: str) -> dict[str, Any]:
    """One gate or timed pass of `entry` in the calling process; an exception reads as the entry's crash."""
    try:
        return league.run_child(entry, setup, mode)
    except Exception as err:  # what league's own child process reports for a crash
        return league.crashed(err)


def small_league(profile: str, rounds: int, images: int, log: Callable[[str], None] = print) -> dict[str, Any]:
    """`league.run_league` on `NOTEBOOK_ENTRIES`: in this process on `ci`, in fresh processes elsewhere."""
    if profile == "ci":
        # TensorFlow (exercise 07's entries) then shares this process with torch: triton must be imported before
        # TensorFlow, or importing it later crashes the interpreter (tests/conftest.py says more).
        import torchvision.ops  # noqa: F401

        return league.run_league(profile, rounds, images, NOTEBOOK_ENTRIES, log, run_entry=in_this_process)
    return league.run_league(profile, rounds, images, NOTEBOOK_ENTRIES, log)


def lessons(result: dict[str, Any]) -> list[str]:
    """For each of your entries in `result`: its standing against the solution of the same exercise, and the
    module to revisit where it is not level with it."""
    rows = {row["name"]: row for row in result["rows"]}
    ranked = sorted((r["name"] for r in rows.values() if r["status"] == "ranked" and r["median"]),
                    key=lambda name: -rows[name]["median"])
    lines = []
    for yours, solution in YOURS.items():
        if yours not in rows:
            continue
        mine, theirs = rows[yours], rows.get(solution)
        if theirs and theirs["status"] == "ranked" and theirs["median"]:
            reference = f"the solution's {theirs['median']:.0f} img/s (ranked {ranked.index(solution) + 1})"
        elif theirs and theirs["note"] == entries.SOLUTIONS_NOTE:
            reference = "no solution to compare with (this copy of the course has no solutions/)"
        else:
            reference = f"the solution {theirs['status'] if theirs else 'not run'}"
        revisit = f"revisit {LESSONS[solution]}"
        if mine["status"] == "ranked" and mine["median"] and theirs and theirs["median"]:
            ratio = mine["median"] / theirs["median"]
            standing = (f"ranked {ranked.index(yours) + 1} of {len(ranked)}, {mine['median']:.0f} img/s: "
                        f"{ratio:.2f}x {reference}")
            verdict = ("level with the solution (within 10%) or ahead" if ratio >= LEVEL else revisit)
            lines.append(f"{yours}: {standing}; {verdict}")
        elif mine["status"] == "ranked":
            lines.append(f"{yours}: ranked, {mine['median']:.0f} img/s; {reference}")
        elif mine["status"] == "not installed":
            lines.append(f"{yours}: not installed ({mine['note']})")
        else:
            lines.append(f"{yours}: {mine['status']} ({mine['note']}); {reference}; {revisit}")
    return lines
