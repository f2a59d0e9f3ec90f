"""Module 11 part 2's input service (loaderlab.dataservice) leaves nothing running when its owner is killed. What a run
delivers, with a worker killed and started again, is asserted where it runs anyway: notebook 11b asserts each sharding
policy's documented promise (DYNAMIC: nothing twice), and exercise 17's step-4 check, graded on the solution in `make
test`, holds the right labels and crops, loopback as the only interface with the servers' listeners seen, and no
process of the service left after the run (each sandbox run costs 25-50 s of the suite's budget)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loaderlab.dataservice.job import sandbox_unavailable
from owners import assert_child_gone_with_its_killed_owner, start_owner  # tests/ is on sys.path

needs_sandbox = pytest.mark.skipif(sandbox_unavailable() is not None,
                                   reason=f"no sandbox here: {sandbox_unavailable()}")
GONE_WITHIN_S = 20.0     # the sandbox's guardian: 5 s of grace, then SIGKILL; the PID namespace goes with its first process
STARTED_WITHIN_S = 90    # three processes importing TensorFlow on 2 busy cores

# The run its owner starts (tests/owners.py): an epoch too long to end while the test runs.
RUN = """
from loaderlab.dataservice.job import ServiceSpec, run_service
threading.Thread(target=run_service, args=(ServiceSpec(num_samples=100_000, timeout_s=600), folder),
                 daemon=True).start()
"""


@needs_sandbox
def test_a_killed_owner_leaves_no_process_of_its_service(tmp_path: Path) -> None:
    owner = start_owner(RUN, tmp_path, "ledger-*.jsonl", '"batch"', STARTED_WITHIN_S)
    assert_child_gone_with_its_killed_owner(owner, GONE_WITHIN_S)
