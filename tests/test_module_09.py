"""Module 09's helpers: loaderlab.distributed runs a function on real ranks (gloo on 127.0.0.1) and reports
what each returned, raised, or where it hung, leaving no process behind and nothing listening beyond loopback;
loaderlab.lessons.m09_ranks holds what notebook 09 runs on those ranks; the notebook's shape and quiz 09."""

from __future__ import annotations

import inspect
import ipaddress
import json
import re
import time
from collections.abc import Callable
from datetime import timedelta

import psutil
import pytest
import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import Backend, BackendConfig
from torch.utils.data import DataLoader

from grader import quiz
from loaderlab import distributed
from loaderlab.lessons import m09_ranks
from loaderlab.distributed import DIED, HUNG, RAISED, RETURNED, STOPPED, RankResult, RanksFailed, run_ranks, values
from loaderlab.paths import REPO_ROOT
from loaderlab.lessons.m09_ranks import WorkerStream

TIMEOUT_S = 15.0


def _listening(process: psutil.Process) -> list[str]:
    return [connection.laddr.ip for connection in process.net_connections("inet")
            if connection.status == psutil.CONN_LISTEN]


def _reduce_ranks(rank: int, world_size: int) -> tuple[int, int, float, list[str]]:
    """All-reduce rank + 1 over the group; report what this rank and the launching process (the store) listen on."""
    total = torch.tensor([rank + 1.0])
    dist.all_reduce(total)
    return rank, world_size, float(total), _listening(psutil.Process()) + _listening(psutil.Process().parent())


def _rank_one_raises(rank: int, world_size: int) -> int:
    if rank == 1:
        raise ValueError("planted failure on rank 1")
    dist.barrier()  # waits for rank 1, which never comes
    return rank


def _unequal_steps(rank: int, world_size: int) -> int:
    """Rank 0 runs one all_reduce more than rank 1, which then waits in a barrier: neither can finish."""
    for _ in range(3 if rank == 0 else 2):
        dist.all_reduce(torch.ones(1))
    dist.barrier()
    return rank


def _rank_one_exits(rank: int, world_size: int) -> int:
    import torch.distributed as dist

    dist.barrier()  # both ranks fully connected first: a rank that dies while gloo still connects fails the other
    if rank == 1:
        import os
        os._exit(3)
    return rank


def _unpicklable(rank: int, world_size: int) -> object:
    return lambda: rank


def _children() -> set[int]:
    return {child.pid for child in psutil.Process().children(recursive=True)}


def _no_rank_processes_left(before: set[int]) -> bool:
    """No process started since `before` is still alive (multiprocessing's resource tracker aside). Those alive
    before are left out: a forkserver that an earlier test started for notebook 09's ranks lives on."""
    return not [child for child in psutil.Process().children(recursive=True)
                if child.pid not in before and "resource_tracker" not in " ".join(child.cmdline())]


# ---- collective_device: decided by the group's backend configuration --------------------------------

@pytest.mark.parametrize(("backend", "device_type"), [("gloo", "cpu"), ("mpi", "cpu"), ("cpu:gloo,cuda:nccl", "cpu"),
                                                      ("nccl", "cuda"), ("xccl", "xpu")])
def test_collective_device_type_follows_torchs_own_backend_configuration(backend: str, device_type: str) -> None:
    """For each backend string, the configuration torch itself builds (BackendConfig, what get_backend_config reads)."""
    assert distributed.collective_device_type(str(BackendConfig(backend))) == device_type


def test_a_group_made_without_a_backend_on_a_cuda_host_collects_on_the_ranks_gpu(monkeypatch) -> None:
    """init_process_group() with no backend: get_backend() reads "undefined", and on a CUDA host torch configures NCCL
    alone, so a CPU tensor fails there ("No backend type associated with device type cpu"); collective_device read
    get_backend and chose the CPU. The configuration is torch's own, built as on a CUDA host. device_id= without a
    backend maps to the device's default backend, NCCL, the same way."""
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda check_available=False: torch.device("cuda"))
    bare = str(BackendConfig(Backend.UNDEFINED))
    assert bare == "cuda:nccl"
    assert str(BackendConfig(Backend.default_device_backend_map["cuda"])) == bare
    monkeypatch.setattr(dist, "get_backend_config", lambda group=None: bare)
    monkeypatch.setattr(torch.accelerator, "current_device_index", lambda: 3)
    assert distributed.collective_device() == torch.device("cuda", 3)


def test_collective_device_type_refuses_a_backend_name() -> None:
    with pytest.raises(ValueError, match="get_backend_config"):
        distributed.collective_device_type("undefined")


def _collect_where_told(rank: int, world_size: int) -> tuple[str, str, float]:
    """Where a rank of run_ranks' gloo group collects, and the solution's exact_mean of unequal score lists there."""
    from solutions.ex12_distributed_epochs import exact_mean

    return dist.get_backend_config(), str(distributed.collective_device()), exact_mean([1.0] * (rank + 1) + [4.0])


def test_a_gloo_group_collects_on_the_cpu() -> None:
    results = values(run_ranks(_collect_where_told, 2, timeout_s=TIMEOUT_S))
    assert results == [("cpu:gloo,cuda:gloo", "cpu", 2.2)] * 2  # (1 + 4 + 1 + 1 + 4) / 5 on both ranks


def test_a_group_made_without_a_backend_on_this_cpu_host_collects_on_the_cpu(monkeypatch) -> None:
    """init_process_group() with no backend, one rank, on this machine without an accelerator: "cpu:gloo"."""
    from solutions.ex12_distributed_epochs import exact_mean

    interface = distributed.loopback_interface()
    if interface:
        monkeypatch.setenv("GLOO_SOCKET_IFNAME", interface)
    if torch.accelerator.current_accelerator(check_available=True) is not None:
        pytest.skip("this machine has an accelerator: the bare group configures its backend instead")
    dist.init_process_group(store=dist.HashStore(), rank=0, world_size=1, timeout=timedelta(seconds=TIMEOUT_S))
    try:
        assert (dist.get_backend(), dist.get_backend_config()) == ("undefined", "cpu:gloo")
        assert distributed.collective_device() == torch.device("cpu")
        assert exact_mean([1.0, 2.0, 6.0]) == 3.0
    finally:
        dist.destroy_process_group()


def test_each_rank_returns_in_rank_order_and_collectives_work() -> None:
    before = _children()
    results = run_ranks(_reduce_ranks, 2, timeout_s=TIMEOUT_S)
    assert [r.status for r in results] == [RETURNED, RETURNED], [r.describe() for r in results]
    gathered = values(results)
    assert [(rank, world, total) for rank, world, total, _ in gathered] == [(0, 2, 3.0), (1, 2, 3.0)]
    assert _no_rank_processes_left(before)


def test_nothing_listens_beyond_loopback() -> None:
    """Gloo's sockets in every rank, and the store in the launching process, listen on the loopback address only."""
    before = _listening(psutil.Process())
    for _, _, _, listening in values(run_ranks(_reduce_ranks, 2, timeout_s=TIMEOUT_S)):
        assert listening and all(ipaddress.ip_address(ip).is_loopback for ip in listening), listening
    assert _listening(psutil.Process()) == before, "the store must be closed once the run is over"


def test_a_rank_that_raises_is_reported_with_its_traceback_and_the_waiting_rank_is_stopped() -> None:
    before = _children()
    start = time.monotonic()
    results = run_ranks(_rank_one_raises, 2, timeout_s=TIMEOUT_S)
    assert time.monotonic() - start < TIMEOUT_S, "a failure must not wait for the whole time limit"
    assert results[1].status == RAISED and "planted failure on rank 1" in results[1].detail
    assert "ValueError" in results[1].detail and "_rank_one_raises" in results[1].detail
    assert results[0].status in (STOPPED, RAISED), results[0].describe()  # gloo may notice rank 1 left first
    with pytest.raises(RanksFailed) as failed:
        values(results)
    assert str(failed.value).startswith("rank 1 raised"), "the cause comes first: the rank that failed first"
    assert _no_rank_processes_left(before)


def test_ranks_blocked_in_collectives_are_reported_as_hung_with_their_stack() -> None:
    before = _children()
    start = time.monotonic()
    results = run_ranks(_unequal_steps, 2, timeout_s=3.0)
    assert time.monotonic() - start < 3.0 + 10, "hung ranks must be stopped soon after the time limit"
    assert [r.status for r in results] == [HUNG, HUNG], [r.describe() for r in results]
    assert "rank 0 hung" in results[0].describe() and "rank 1 hung" in results[1].describe()
    if hasattr(__import__("signal"), "SIGUSR1"):
        assert "_unequal_steps" in results[0].detail, results[0].detail
    assert _no_rank_processes_left(before)


def test_a_rank_that_dies_and_a_value_that_cannot_travel_are_named() -> None:
    before = _children()
    results = run_ranks(_rank_one_exits, 2, timeout_s=TIMEOUT_S)
    assert results[0].status == RETURNED and results[1].status == DIED and "code 3" in results[1].detail
    results = run_ranks(_unpicklable, 2, timeout_s=TIMEOUT_S)
    assert all(r.status == RAISED and "could not be sent back" in r.detail for r in results)
    assert _no_rank_processes_left(before)


def test_bad_world_size_is_refused() -> None:
    with pytest.raises(ValueError, match="world_size"):
        run_ranks(_reduce_ranks, 0)


# ---- loaderlab.lessons.m09_ranks: what notebook 09 runs on real ranks -------------------------------------------------

def _on_ranks(function: Callable[..., object], world_size: int, args: tuple = (),
              timeout_s: float = TIMEOUT_S) -> list[RankResult]:
    """run_ranks as notebook 09 starts them (forkserver where there is one)."""
    return run_ranks(function, world_size, args=args, timeout_s=timeout_s, start_method=m09_ranks.rank_start_method())


def test_distributed_sampler_pads_and_drops_where_the_exact_split_does_not() -> None:
    got = values(_on_ranks(m09_ranks.distributed_sampler_evaluation_on_rank, 3, (10,)))
    shares = {way: [g["shares"][way] for g in got] for way in ("padded", "drop_last", "exact")}
    assert shares["padded"] == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
    assert sorted(sum(shares["drop_last"], [])) == list(range(9))
    assert sorted(sum(shares["exact"], [])) == list(range(10))
    truth = sum(m09_ranks.sample_loss(i) for i in range(10)) / 10
    assert all(abs(g["means"]["exact"] - truth) < 1e-12 for g in got)
    assert abs(got[0]["means"]["padded"] - truth) > 1e-3


def test_unequal_batch_counts_fail_or_hang_and_even_ones_return() -> None:
    left = _on_ranks(m09_ranks.train_on_rank, 2, (13, 2, False, False))
    assert [r.status for r in left] == [RAISED, RETURNED] and left[1].value == 3
    assert "rank 0: raised" in m09_ranks.outcome(left[0])
    hung = _on_ranks(m09_ranks.train_on_rank, 2, (13, 2, False, True), timeout_s=2.0)
    assert [r.status for r in hung] == [HUNG, HUNG]
    if hasattr(__import__("signal"), "SIGUSR1"):
        assert "all_reduce" in m09_ranks.outcome(hung[0]) and "barrier" in m09_ranks.outcome(hung[1])
        assert "m09_ranks.py:" in m09_ranks.outcome(hung[0]) and "train_on_rank" in m09_ranks.outcome(hung[0])
    assert values(_on_ranks(m09_ranks.train_on_rank, 2, (13, 2, True, False))) == [3, 3]


def test_a_hung_ranks_stack_keeps_the_helpers_own_frames() -> None:
    """Notebook 09's "blocked in:" line names where the rank waited: the helper's own lines and torch's collective,
    nothing else (the filter once named a file that had been renamed, and kept only torch's frames)."""
    helper = m09_ranks.__file__
    stack = (f'  File "/somewhere/site-packages/torch/distributed/distributed_c10d.py", line 2501 in all_reduce\n'
             f'  File "{helper}", line 109 in train_on_rank\n'
             f'  File "/somewhere/loaderlab/distributed.py", line 80 in _run_rank\n')
    assert m09_ranks.blocked_in(stack) == ["distributed_c10d.py:2501 all_reduce", "m09_ranks.py:109 train_on_rank"]


def test_shard_slots_leave_workers_idle_and_the_sample_split_evens_ranks_out() -> None:
    sizes = (10, 10, 10, 7)
    by_shard = values(_on_ranks(m09_ranks.load_shards_on_rank, 2, (sizes, 3, 4, "shards")))
    assert [g["batches"] for g in by_shard] == [9, 2] and by_shard[1]["samples"] == {0: 7, 1: 0, 2: 0}
    by_sample = values(_on_ranks(m09_ranks.load_shards_on_rank, 2, (sizes, 3, 4, "samples")))
    assert [g["batches"] for g in by_sample] == [5, 5]
    assert [sum(g["samples"].values()) for g in by_sample] == [18, 18]


def test_whole_batches_per_worker_keep_the_order_and_single_samples_do_not() -> None:
    indices = [5, 3, 9, 0, 7, 1, 8, 2, 6, 4, 10]
    expected = [indices[i:i + 3] for i in range(0, len(indices), 3)]

    def batches(by: str, workers: int) -> list[list[int]]:
        return [b.tolist() for b in DataLoader(WorkerStream(indices, 3, by), batch_size=3, num_workers=workers,
                                               timeout=30 if workers else 0)]

    assert batches("batch", 0) == batches("batch", 2) == expected
    assert batches("sample", 2) != expected and sorted(sum(batches("sample", 2), [])) == sorted(indices)
    with pytest.raises(ValueError, match="by"):
        WorkerStream(indices, 3, "shard")


# ---- notebook 09 and quiz 09 ------------------------------------------------------------------------------------

def test_notebook_09_runs_its_ranks_from_loaderlab_and_ends_with_exercise_12_and_the_quiz() -> None:
    cells = json.loads((REPO_ROOT / "notebooks" / "09_beyond_one_machine.ipynb").read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    markdown = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    assert re.search(r"takes about .* on 2 cores", markdown[0]), "say at the top how long the notebook takes on 2 cores"
    assert not [s for s in code if re.search(r"^def \w+\(rank", s, re.M)], "rank functions belong in loaderlab.lessons.m09_ranks"
    started = re.findall(r"\b(?:run_ranks|on_ranks|timed_run)\(([\w.]+)", "\n".join(code))
    assert started and all(f.startswith("m09_ranks.") or f == "function" for f in started), started
    assert "START_METHOD = m09_ranks.rank_start_method()" in code[0], "start ranks as m09_ranks.rank_start_method() says"
    assert "ex12_distributed_epochs" in markdown[-1] and "grader.quiz 09" in markdown[-1]


def test_notebook_09_says_what_debug_detail_checks_and_quotes_streaming_exactly() -> None:
    """Review N12: TORCH_DISTRIBUTED_DEBUG=DETAIL wraps every process group (torch 2.14.1 distributed_c10d.py,
    _create_process_group_wrapper), not DDP alone; Streaming's partitioning code says "evenly divisible"."""
    cells = json.loads((REPO_ROOT / "notebooks" / "09_beyond_one_machine.ipynb").read_text())["cells"]
    text = " ".join(" ".join("".join(c["source"]).split()) for c in cells)
    assert "makes DDP check" not in text and "wraps every process group" in text
    assert '"Either canonical or physical nodes must be evenly divisible by the other"' in text
    import torch.distributed.distributed_c10d as c10d

    assert "_create_process_group_wrapper" in inspect.getsource(c10d._new_process_group_helper)


def test_quiz_09_has_five_to_eight_questions_grounded_in_the_notebook() -> None:
    module = quiz.load("09")
    assert 5 <= len(module.questions) <= 8
    assert all(quiz.grade(module, [q.answer for q in module.questions]))
    assert all("notebook" in q.why for q in module.questions), "ground every `why` in notebook 09"
