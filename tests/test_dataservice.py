"""Module 11 part 2's input service (loaderlab.dataservice): a trainer fed by tf.data service on this machine receives
every sample with the right label and crop, listens on loopback alone, and leaves nothing running when its owner is
killed; with a worker killed and started again under DYNAMIC sharding, no sample arrives twice (tf.data service's
"at most once")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from loaderlab.dataservice.job import ServiceSpec, run_service, sandbox_unavailable
from loaderlab.images import list_samples
from loaderlab.paths import dataset_dir
from loaderlab.processes import python_environment
from owners import assert_child_gone_with_its_killed_owner  # tests/ is on sys.path

needs_sandbox = pytest.mark.skipif(sandbox_unavailable() is not None,
                                   reason=f"no sandbox here: {sandbox_unavailable()}")
GONE_WITHIN_S = 20.0     # the sandbox's guardian: 5 s of grace, then SIGKILL; the PID namespace goes with its first process
STARTED_WITHIN_S = 90    # three processes importing TensorFlow on 2 busy cores

# An owner that runs an epoch too long to end in a thread, prints the pids under it once the first batch arrived, and
# waits to be killed.
OWNER = """
import sys, threading, time
from pathlib import Path
import psutil
from loaderlab.dataservice.job import ServiceSpec, run_service
folder = Path(sys.argv[1])
threading.Thread(target=run_service, args=(ServiceSpec(num_samples=100_000, timeout_s=600), folder),
                 daemon=True).start()
deadline = time.monotonic() + float(sys.argv[2])
while not any('"batch"' in p.read_text() for p in folder.glob("ledger-*.jsonl")):
    assert time.monotonic() < deadline, "no batch arrived"
    time.sleep(0.1)
print(" ".join(str(p.pid) for p in psutil.Process().children(recursive=True)), flush=True)
time.sleep(600)
"""


@needs_sandbox
def test_a_restarted_worker_under_dynamic_sharding_sends_nothing_twice_and_only_loopback_listens(tmp_path: Path) -> None:
    spec = ServiceSpec(workers=2, policy="DYNAMIC", num_samples=120, batch_size=8, kill_after=40, timeout_s=60)
    result = run_service(spec, tmp_path)
    assert result.returncode == 0 and not result.timed_out, result.describe()
    assert result.interfaces == ["lo"], f"the service's network held {result.interfaces}"
    assert {port for _, port in result.listeners} >= {5050, 5051, 5052}, result.listeners
    assert result.event("worker 0 started again"), result.describe()
    visits = result.visitation()
    assert visits.more == 0, f"DYNAMIC sharding promises at most once: {visits}"
    samples = list_samples(dataset_dir() / "train")
    for batch in result.batches():
        assert batch["labels"] == [samples[k % len(samples)].label for k in batch["keys"]]
        assert batch["shape"][1:] == [224, 224, 3]
    left = [p.pid for p in psutil.process_iter(["cmdline"]) if str(tmp_path) in " ".join(p.info["cmdline"] or ())]
    assert not left, f"processes of the service still running after it ended: {left}"


@needs_sandbox
def test_a_killed_owner_leaves_no_process_of_its_service(tmp_path: Path) -> None:
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path), str(STARTED_WITHIN_S)],
                             stdout=subprocess.PIPE, text=True, env=python_environment())
    assert_child_gone_with_its_killed_owner(owner, GONE_WITHIN_S)
