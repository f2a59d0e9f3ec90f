"""Module 11 part 2's second engine (loaderlab.raydata): a local Ray cluster in the sandbox leaves nothing running
when its owner is killed, and a run's records read back as the notebook counts them. What a run delivers (each key
once with a worker killed and its task retried, a loud failure without retries), the listeners (loopback only) and
what is left after a run are asserted where it runs anyway, in notebook 11b, run by `make test` in the hand-out (each
Ray sandbox costs about 30 s of the suite's budget)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from loaderlab.ledger import Visitation
from loaderlab.raydata.job import RAY_TEMP_NOTE, RayEpoch, RayResult
from loaderlab.sandbox import unavailable as sandbox_unavailable
from owners import assert_child_gone_with_its_killed_owner, start_owner  # tests/ is on sys.path

needs_sandbox = pytest.mark.skipif(sandbox_unavailable() is not None,
                                   reason=f"no sandbox here: {sandbox_unavailable()}")
GONE_WITHIN_S = 20.0     # the sandbox's guardian: 5 s of grace, then SIGKILL; the PID namespace goes with its first process
STARTED_WITHIN_S = 90    # ray.init took 7-12 s on 2 cores

# The run its owner starts (tests/owners.py): an epoch too long to end while the test runs; the owner is killed once
# the cluster is up (`ray started` in the ledger).
RUN = """
from loaderlab.raydata.job import RayEpoch, run_ray_epochs
threading.Thread(target=run_ray_epochs, args=([RayEpoch(num_samples=4000, timeout_s=600)], folder),
                 daemon=True).start()
"""


@needs_sandbox
def test_a_killed_owner_leaves_no_process_of_its_ray_cluster(tmp_path: Path) -> None:
    owner = start_owner(RUN, tmp_path, "ledger-*.jsonl", '"ray started"', STARTED_WITHIN_S)
    try:
        assert_child_gone_with_its_killed_owner(owner, GONE_WITHIN_S)
    finally:   # the killed owner could not remove its run's temporary folder: this test does
        shutil.rmtree((tmp_path / RAY_TEMP_NOTE).read_text(), ignore_errors=True)


def _result(spec: RayEpoch, batches: list[tuple[int, list[int]]], attempts: list[dict]) -> RayResult:
    records = [{"t": 0.0, "kind": "batch", "rank": rank, "keys": keys} for rank, keys in batches]
    return RayResult(spec, 0, 1.0, records, attempts, "", [("127.0.0.1", 1), ("0.0.0.0", 2)], ["lo"], False, [])


def test_a_results_records_read_back_as_the_notebook_counts_them() -> None:
    """Visitation over every rank, keys by rank, runs per block, the retry's delay and the listeners off loopback."""
    spec = RayEpoch(num_samples=6, block_size=3, kill_block=1)
    attempts = [{"block": 0, "pid": 5, "t": 1.0, "killed": False},
                {"block": 1, "pid": 6, "t": 1.0, "killed": True, "killed_at": 1.5},
                {"block": 1, "pid": 7, "t": 2.25, "killed": False}]
    result = _result(spec, [(0, [0, 1]), (1, [3, 4]), (0, [1])], attempts)
    assert result.visitation() == Visitation(5, 3, 1, [2, 5])
    assert result.keys(rank=1) == [3, 4] and result.keys() == [0, 1, 3, 4, 1]
    assert result.blocks_run() == {0: 1, 1: 2}
    assert result.retried_after_s() == 0.75
    assert result.off_loopback() == [("0.0.0.0", 2)]
    assert _result(spec, [], attempts[:2]).retried_after_s() is None


def test_an_epoch_refuses_a_block_it_does_not_have() -> None:
    with pytest.raises(ValueError, match="kill_block 20"):
        RayEpoch(num_samples=200, block_size=10, kill_block=20)
    assert json.loads(json.dumps(RayEpoch(kill_block=19).__dict__))["kill_block"] == 19
