"""Module 11's elastic job (loaderlab.elastic): a real torchrun job of two nodes on this machine listens on loopback
alone and leaves nothing running, when its owner is killed or one of its agents is. What the job trains, with and
without failures, is graded by exercise 16's checks, on its solution (in the same run)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from loaderlab.elastic.job import Fault, JobSpec, run_job, sandbox_unavailable
from loaderlab.processes import naming
from owners import assert_child_gone_with_its_killed_owner, start_owner  # tests/ is on sys.path

needs_sandbox = pytest.mark.skipif(sandbox_unavailable() is not None,
                                   reason=f"no sandbox here: {sandbox_unavailable()}")
SOLUTION = JobSpec(hooks="ex16_elastic_epochs", path=("solutions",), num_samples=40, timeout_s=90)
GONE_WITHIN_S = 20.0   # the sandbox's guardian: 5 s of grace, then SIGKILL; the PID namespace goes with its first process
STARTED_WITHIN_S = 90  # two agents and two ranks importing torch on 2 busy cores
AGENT_JOB_TIMEOUT_S = 30.0   # a job of 40 samples took 15 s here; past it the surviving agent waits in its exit barrier

# The job its owner starts (tests/owners.py): an epoch too long to end while the test runs.
RUN = """
from loaderlab.elastic.job import JobSpec, run_job
threading.Thread(target=run_job, args=(JobSpec(hooks="ex16_elastic_epochs", path=("solutions",), num_samples=4000,
                 step_time_s=0.05, timeout_s=600), folder), daemon=True).start()
"""


@needs_sandbox
def test_a_killed_owner_leaves_no_process_of_its_job(tmp_path: Path) -> None:
    owner = start_owner(RUN, tmp_path, "ledger/*.jsonl", '"begin"', STARTED_WITHIN_S)
    assert_child_gone_with_its_killed_owner(owner, GONE_WITHIN_S)


@needs_sandbox
def test_a_killed_agent_leaves_no_process_once_its_job_ends(tmp_path: Path) -> None:
    """SIGKILL to one torchrun agent alone: its rank lives on (it runs in a session of its own) and trains the epoch to
    its end with the other; the other agent then waits for the lost one in its exit barrier (300 s, torchrun's
    `exit_barrier_timeout`, which its command line does not set) until the job's time limit stops it. Nothing of the
    job is left running after it, and while it ran loopback was its only interface (its listeners, the rendezvous
    store's and gloo's, bind every interface there)."""
    spec = replace(SOLUTION, timeout_s=AGENT_JOB_TIMEOUT_S, faults=(Fault("kill_agent", at_step=3, node=1),))
    result = run_job(spec, tmp_path)
    assert result.interfaces == ["lo"], f"the job's network held {result.interfaces}"
    ports = {port for _, port in result.listeners}
    assert len(ports) >= 2, f"the rendezvous store and gloo's sockets should have been seen: {result.listeners}"
    [killed_at] = [e["t"] for e in result.events if "agent alone killed" in e["event"]]
    [attempt] = result.attempts()
    assert attempt.ended_ranks == {0, 1}, result.describe()
    assert any(end > killed_at for (_, rank), (_, end) in attempt.step_times.items() if rank == 1), result.describe()
    assert result.timed_out, "the other agent should wait in its exit barrier\n" + result.describe()
    left = list(naming(tmp_path))
    assert not left, f"processes of the job still running after it ended: {left}\n" + result.describe()
