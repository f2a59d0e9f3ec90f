"""`make test`'s phases, each declared once as data, and the runner that runs them (a maintainers' command: the
hand-out has no tests/ and no need of it).

    python -m tests.phases [--phases course|python|alternatives] [--record FILE] [--append] [--label VENV] [--handout DIR]
                           [--collect-only | --dry-run]

`course` (`make test`): a hand-out first (`make learner-copy`, beside the checkout, named in LOADERLAB_HANDOUT),
then COURSE. `python` (`make test-python`, on another Python's venv): PYTHON. `targets` (`make test-targets`):
TARGETS. `proofs` (`make test-proofs`): PROOFS. Run with the venv's interpreter: every
phase runs under it. Every phase runs even when one fails; each phase's time is printed and written to `--record`;
the run fails if any phase did. `--collect-only` counts what each phase would run (pytest's count) and makes
nothing: compare it before and after changing a phase. `--dry-run` prints each phase's command line.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

from loaderlab.paths import REPO_ROOT, STORAGE_DIR
from loaderlab.storage.bucket import upload_dataset
from loaderlab.storage.server import StorageServerError, running_server
from loaderlab.tools.install import read_record
from tests import proofs

# Every phase: the small dataset, and ten processes waiting with each exercise's libraries imported
# (grader/preload.py).
COURSE_ENV = {"LOADERLAB_PROFILE": "ci", "LOADERLAB_WAITING_PROCESSES": "10"}
# One S3 server for the whole run (module 10), announced to every phase in LOADERLAB_S3_* variables
# (loaderlab.storage.server.shared_server), its data apart from a learner's `make storage`.
RUN_STORAGE_DIR = STORAGE_DIR / "test-run"
# Where tests run side by side, torch's OpenMP threads must sleep, not spin, while they wait for work: three
# trainings of the capstone's model at once took 20-30 s each with the default policy and 6-10 s with a passive
# one (3.3 s alone; 2 cores, one run each). The timed phase keeps the default, as a learner's machine has it.
SIDE_BY_SIDE_ENV = {"OMP_WAIT_POLICY": "PASSIVE"}


@dataclass(frozen=True)
class Phase:
    """One pytest session of the suite: what it selects, how many at a time, and where it runs."""

    title: str                   # its line in the record, with its time
    args: tuple[str, ...]        # pytest's paths and options
    markers: str                 # pytest -m: which of those tests
    workers: int = 1             # 1: one at a time, in one process (what measures speed); more: pytest-xdist
    dist: str = "worksteal"      # how pytest-xdist hands tests out ("loadfile": a notebook's cells together)
    in_handout: bool = False     # run in the hand-out, with only it importable (the notebooks, as a learner has them)
    beside_next: bool = False    # start the next phase as this one starts: both run at once (untimed phases only)
    settings: tuple[tuple[str, str], ...] = ()  # environment variables of this phase alone

    def command(self, python: str, collect_only: bool = False) -> list[str]:
        """The pytest command line under `python`."""
        parallel = ["-n", str(self.workers), "--dist", self.dist] if self.workers > 1 and not collect_only else []
        selection = ["-m", self.markers] if self.markers else []
        return [python, "-m", "pytest", *self.args, *selection, *parallel, *(["--collect-only", "-q"] * collect_only)]

    def env(self) -> dict[str, str]:
        return COURSE_ENV | (SIDE_BY_SIDE_ENV if self.workers > 1 else {}) | dict(self.settings)


# What times nothing runs side by side: the project tests with the graders' correctness checks on solutions/ in one
# session (three at a time on 2 cores: the third keeps the cores busy while the tests of hangs and timeouts wait;
# measured 294 s with two, 236 s with three), then the notebooks in the hand-out, then the same checks again under
# spawn for the exercises that start processes. What measures speed runs last, alone.
UNTIMED = Phase("untimed: project tests (stubs graded in the hand-out) + graders' correctness on solutions",
                ("tests/", "grader/", "--target", "solutions", "--durations=20"),
                "not timing and not throughput", workers=3)
# The notebooks leave the cores idle while they wait on their emulated networks and kernels, the spawn pass while its
# checks wait on timeouts and new interpreters: run side by side they took 199 s, one after the other 157 + 84 s
# (a fresh clone's `make test`, 2-core development machine, nothing else running, 2026-12-07).
NOTEBOOKS = Phase("notebooks in the hand-out", ("--nbval-lax", "--nbval-current-env", "notebooks/", "--durations=10"),
                  "", workers=2, dist="loadfile", in_handout=True, beside_next=True)
SPAWN = Phase("graders' correctness on solutions under spawn",
              ("grader/", "--target", "solutions", "--start-method", "spawn", "--durations=10"),
              "starts_processes and not throughput and not spawn_case_of_its_own and not spawn_covered_by", workers=2)
TIMED = Phase("timed: project tests that time + graders' timed checks on solutions",
              ("tests/", "grader/", "--target", "solutions", "--results", ".grader/solutions.json", "--durations=15"),
              "(timing or throughput) and not target_proof")
COURSE = (UNTIMED, NOTEBOOKS, SPAWN, TIMED)
# Another Python (README, Platforms): the graders' correctness on solutions/ and every notebook, as COURSE's untimed
# phases run them, in the checkout (no hand-out).
PYTHON = (replace(UNTIMED, title="graders' correctness on solutions", args=("grader/", "--target", "solutions",
                                                                              "--durations=10")),
          replace(NOTEBOOKS, title="notebooks", in_handout=False, beside_next=False))
# `make test-targets`: the proofs of the timed targets, one at a time: every planted slow implementation misses its
# target and every correct alternative meets the targets its route could move. Each proof that passes is recorded
# with a fingerprint of the code it ran on (tests/proofs.py), and COURSE fails while a fingerprint differs.
# They left COURSE to keep it within its budget on 2 cores: the alternatives 123 s (2026-11-27), the planted slow
# implementations 150-160 s of the timed phase (2026-11-28).
TARGETS = (Phase("the proofs of the timed targets: planted slow implementations and correct alternatives",
                 ("tests/test_graders.py", "--durations=15"), proofs.TIMED.markers,
                 settings=((proofs.TIMED.env, "1"),)),)
# `make test-proofs`: every correctness proof re-run and recorded (tests/proofs.py), three at a time as UNTIMED runs
# them; COURSE then re-runs only the proofs whose fingerprint differs from the record, and fails them until recorded.
PROOFS = (Phase("the proofs of the correctness checks: planted wrong implementations and correct alternatives",
                ("tests/test_graders.py", "--durations=15"), proofs.CORRECTNESS.markers, workers=3,
                settings=((proofs.CORRECTNESS.env, "1"),)),)
PHASE_SETS = {"course": COURSE, "python": PYTHON, "targets": TARGETS, "proofs": PROOFS}


def default_handout() -> Path:
    """Beside the checkout, one per checkout: `$TMPDIR/loaderlab-handout-<checkout's folder name>`."""
    return Path(tempfile.gettempdir()) / f"loaderlab-handout-{REPO_ROOT.name}"


@dataclass
class Started:
    """A phase's pytest session, started: what its line in the record says, and where its output goes."""

    title: str
    process: subprocess.Popen
    start: float
    log: Path | None   # a phase run beside another writes here, and its output is printed whole once it ends


def start(title: str, command: list[str], *, cwd: Path = REPO_ROOT, env: dict[str, str] | None = None,
          quiet: bool = False, log: Path | None = None) -> Started:
    """Start `command` (its output to this terminal, to `log` where given, nowhere when `quiet`)."""
    output = log.open("wb") if log is not None else subprocess.DEVNULL if quiet else None
    try:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT if log else None)
    finally:
        if log is not None:
            output.close()
    return Started(title, process, time.monotonic(), log)


def finish(started: Started) -> tuple[bool, str]:
    """Wait for a started phase (its log printed whole, where it had one): whether it passed, and its record line."""
    returncode = started.process.wait()
    line = f"  {time.monotonic() - started.start:.0f} s  {started.title}\n"
    if started.log is not None:
        print(f"\n---- the output of {started.title} ----\n"
              f"{started.log.read_text(errors='replace')}", flush=True)
    return returncode == 0, line


def timed(title: str, command: list[str], record: Path, *, cwd: Path = REPO_ROOT, env: dict[str, str] | None = None,
          quiet: bool = False) -> bool:
    """Run `command`, append its time and `title` to `record`; True if it passed."""
    passed, line = finish(start(title, command, cwd=cwd, env=env, quiet=quiet))
    with record.open("a") as out:
        out.write(line)
    return passed


def run(phases: tuple[Phase, ...], record: Path, handout: Path | None, label: str = "") -> list[str]:
    """Start the run's S3 server, make the hand-out where one is given, then run every phase, whatever failed before;
    the titles that failed."""
    with ExitStack() as stack:
        env, failed = dict(os.environ), []
        start = time.monotonic()
        try:
            endpoint = stack.enter_context(running_server(RUN_STORAGE_DIR))
            upload_dataset(endpoint, COURSE_ENV["LOADERLAB_PROFILE"])
            env |= endpoint.env()
        except (StorageServerError, OSError) as err:
            print(f"the run's S3 server did not start: {err}", file=sys.stderr)
            failed.append("the run's S3 server")
        with record.open("a") as out:
            out.write(f"  {time.monotonic() - start:.0f} s  the run's S3 server started, the ci data in it\n")
        return failed + run_phases(phases, record, handout, env, label)


def run_phases(phases: tuple[Phase, ...], record: Path, handout: Path | None, env: dict[str, str],
               label: str = "") -> list[str]:
    """Make the hand-out where one is given, then run every phase under `env`, whatever failed before; the titles
    that failed."""
    python, env, failed = sys.executable, dict(env), []
    named = f"{label}: " if label else ""
    if handout is not None:
        shutil.rmtree(handout, ignore_errors=True)
        if not timed("a hand-out (make learner-copy)",
                     [python, "-m", "grader.learner_copy", str(handout), "--for-testing"], record, quiet=True):
            failed.append("a hand-out")
        env["LOADERLAB_HANDOUT"] = str(handout)
    beside: list[tuple[Phase, Started]] = []   # started beside the phase that follows it
    for phase in phases:
        at_a_time = f" ({phase.workers} at a time)" if phase.workers > 1 else " (one at a time)"
        where, phase_env = REPO_ROOT, env | phase.env()
        if phase.in_handout:
            where = handout
            phase_env["PYTHONPATH"] = os.pathsep.join([str(handout / ".isolate"), str(handout)])
        title = named + phase.title + at_a_time + (", beside the next phase" if phase.beside_next else "")
        log = record.with_name(f"{record.stem}-beside-{len(beside)}.log") if phase.beside_next else None
        started = [*beside, (phase, start(title, phase.command(python), cwd=where, env=phase_env, log=log))]
        if phase.beside_next:
            beside = started[-1:]
            continue
        beside = []
        failed += finish_all(started, record, named)
    return failed + finish_all(beside, record, named)   # a last phase marked beside_next has no next to wait for


def finish_all(started: list[tuple[Phase, Started]], record: Path, named: str) -> list[str]:
    """Wait for each started phase, the last started first (the one beside it prints its output after); record each
    one's time; the titles that failed."""
    failed = []
    for phase, running in reversed(started):
        passed, line = finish(running)
        with record.open("a") as out:
            out.write(line)
        if not passed:
            failed.append(named + phase.title)
    return failed


def collect(phases: tuple[Phase, ...]) -> int:
    """Each phase's selection, as pytest counts it (in the checkout: a notebook is the same file in the hand-out)."""
    failed = 0
    for phase in phases:
        done = subprocess.run(phase.command(sys.executable, collect_only=True), cwd=REPO_ROOT,
                              env=os.environ | phase.env(), capture_output=True, text=True)
        counted = (done.stdout.strip().splitlines() or ["no output"])[-1]
        print(f"{phase.title}: {counted}")
        failed += done.returncode != 0
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.phases", description=__doc__.split("\n\n")[0])
    parser.add_argument("--phases", choices=PHASE_SETS, default="course")
    parser.add_argument("--record", type=Path, default=Path(".grader/phases.txt"), help="each phase's time, here")
    parser.add_argument("--append", action="store_true", help="add to the record (make test-pythons) instead of "
                                                              "starting it afresh")
    parser.add_argument("--label", default="", help="put before each phase's title (make test-python: the venv)")
    parser.add_argument("--handout", type=Path, default=None, help="where the hand-out is made (course only)")
    parser.add_argument("--collect-only", action="store_true", help="count what each phase selects; run nothing")
    parser.add_argument("--dry-run", action="store_true", help="print each phase's command line; run nothing")
    parser.add_argument("--installed", type=Path, help="the venv's install record (loaderlab/tools/install.py): "
                                                          "its time goes first in the record")
    args = parser.parse_args(argv)
    phases = PHASE_SETS[args.phases]
    if args.collect_only:
        return collect(phases)
    if args.dry_run:
        for phase in phases:
            settings = " ".join(f"{name}={value}" for name, value in phase.env().items())
            print(f"{phase.title}{' (in the hand-out)' * phase.in_handout}: {settings} {shlex.join(phase.command(sys.executable))}")
        return 0
    handout = (args.handout or default_handout()).resolve() if any(p.in_handout for p in phases) else None
    args.record.parent.mkdir(parents=True, exist_ok=True)
    with args.record.open("a" if args.append else "w") as out:
        if args.installed:
            seconds = read_record(args.installed).get("seconds", "?")
            out.write(f"  {seconds} s  {args.label}: install (Python {sys.version.split()[0]})\n")
    failed = run(phases, args.record, handout, args.label)
    print(f"\ntime by phase:\n{args.record.read_text()}", end="")
    print(f"FAILED: {'; '.join(failed)}" if failed else "all phases passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
