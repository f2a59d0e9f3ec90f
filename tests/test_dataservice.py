"""Module 11 part 2's input service (loaderlab.dataservice) leaves nothing running when its owner is killed. What a run
delivers, with a worker killed and started again, is asserted where it runs anyway: notebook 11b asserts each sharding
policy's documented promise (DYNAMIC: nothing twice), and exercise 17's step-4 check, graded on the solution in `make
test`, holds the right labels and crops, loopback as the only interface with the servers' listeners seen, and no
process of the service left after the run (each sandbox run costs 25-50 s of the suite's budget)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loaderlab.dataservice.job import ServiceResult, ServiceSpec, sandbox_unavailable
from loaderlab.ledger import epoch_ledger, read_epochs, write_epochs
from owners import assert_child_gone_with_its_killed_owner, start_owner  # tests/ is on sys.path

needs_sandbox = pytest.mark.skipif(sandbox_unavailable() is not None,
                                   reason=f"no sandbox here: {sandbox_unavailable()}")
GONE_WITHIN_S = 20.0     # the sandbox's guardian: 5 s of grace, then SIGKILL; the PID namespace goes with its first process
STARTED_WITHIN_S = 90    # for the trainer to start the servers' processes, on 2 busy cores

# The run its owner starts (tests/owners.py): an epoch too long to end while the test runs. The owner is killed once the
# trainer has started the servers' processes (`servers started`), while they import TensorFlow: the sandbox ends them
# wherever they are (waiting for the first batch instead cost three TensorFlow imports more of the suite's time).
RUN = """
from loaderlab.dataservice.job import ServiceSpec, run_service
threading.Thread(target=run_service, args=(ServiceSpec(num_samples=100_000, timeout_s=600), folder),
                 daemon=True).start()
"""


@needs_sandbox
def test_a_killed_owner_leaves_no_process_of_its_service(tmp_path: Path) -> None:
    owner = start_owner(RUN, tmp_path, "ledger-*.jsonl", '"servers started"', STARTED_WITHIN_S)
    assert_child_gone_with_its_killed_owner(owner, GONE_WITHIN_S)


def test_a_coordinated_reads_epoch_says_what_it_lacks() -> None:
    """Coordinated reads need the service, ranks to coordinate and no fault: a spec without them is refused, naming
    each field."""
    for wrong in ({"world_size": 1}, {"workers": 0, "decode_in": "trainer"}, {"kill_after": 8}, {"steps": 0}):
        with pytest.raises(ValueError, match="coordinated-reads epoch needs") as raised:
            ServiceSpec(**{"round_sides": (128, 224), "world_size": 2} | wrong)
        assert all(f"{name}=" in str(raised.value) for name in wrong if name != "decode_in"), raised.value


def test_a_run_s_epochs_come_back_from_its_folder_as_written(tmp_path: Path) -> None:
    """The trainer reads the owner's specs back whole: tuples stay tuples, and each epoch's old ledger is removed."""
    specs = [ServiceSpec(round_sides=(128, 176), world_size=2, coordinated=True),
             ServiceSpec(hooks="ex17", hooks_path=("solutions",), world_size=2)]
    epoch_ledger(tmp_path, 1).write_text("left from an earlier run\n")
    write_epochs(tmp_path, specs)
    assert read_epochs(tmp_path, ServiceSpec) == specs and not epoch_ledger(tmp_path, 1).exists()


def test_step_sides_pair_the_ranks_batches_step_by_step() -> None:
    """What each step's replicas trained on: rank 0's side first, as many steps as every rank took."""
    spec = ServiceSpec(round_sides=(128, 224), world_size=2, steps=3)
    records = [{"t": 0.0, "kind": "batch", "rank": rank, "step": step, "keys": [0], "shape": [1, side, side, 3]}
               for rank, step, side in ((0, 0, 128), (1, 0, 128), (1, 1, 224), (0, 1, 128), (0, 2, 224),
                                        (1, 2, 224))]
    result = ServiceResult(spec, 0, 1.0, records, {}, [], ["lo"])
    assert result.step_sides() == [(128, 128), (128, 224), (224, 224)]
    assert ServiceResult(spec, 0, 1.0, records[:3], {}, [], ["lo"]).step_sides() == [(128, 128)]
