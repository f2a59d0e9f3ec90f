"""Module 09's helper: loaderlab.distributed runs a function on real ranks (gloo on 127.0.0.1) and reports
what each returned, raised, or where it hung, leaving no process behind and nothing listening beyond loopback."""

from __future__ import annotations

import ipaddress
import time

import psutil
import pytest
import torch
import torch.distributed as dist

from loaderlab.distributed import DIED, HUNG, RAISED, RETURNED, STOPPED, RanksFailed, run_ranks, values

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
    if rank == 1:
        import os
        os._exit(3)
    return rank


def _unpicklable(rank: int, world_size: int) -> object:
    return lambda: rank


def _no_rank_processes_left() -> bool:
    return not [child for child in psutil.Process().children(recursive=True)
                if "resource_tracker" not in " ".join(child.cmdline())]


def test_each_rank_returns_in_rank_order_and_collectives_work() -> None:
    results = run_ranks(_reduce_ranks, 2, timeout_s=TIMEOUT_S)
    assert [r.status for r in results] == [RETURNED, RETURNED], [r.describe() for r in results]
    gathered = values(results)
    assert [(rank, world, total) for rank, world, total, _ in gathered] == [(0, 2, 3.0), (1, 2, 3.0)]
    assert _no_rank_processes_left()


def test_nothing_listens_beyond_loopback() -> None:
    """Gloo's sockets in every rank, and the store in the launching process, listen on the loopback address only."""
    before = _listening(psutil.Process())
    for _, _, _, listening in values(run_ranks(_reduce_ranks, 2, timeout_s=TIMEOUT_S)):
        assert listening and all(ipaddress.ip_address(ip).is_loopback for ip in listening), listening
    assert _listening(psutil.Process()) == before, "the store must be closed once the run is over"


def test_a_rank_that_raises_is_reported_with_its_traceback_and_the_waiting_rank_is_stopped() -> None:
    start = time.monotonic()
    results = run_ranks(_rank_one_raises, 2, timeout_s=TIMEOUT_S)
    assert time.monotonic() - start < TIMEOUT_S, "a failure must not wait for the whole time limit"
    assert results[1].status == RAISED and "planted failure on rank 1" in results[1].detail
    assert "ValueError" in results[1].detail and "_rank_one_raises" in results[1].detail
    assert results[0].status in (STOPPED, RAISED), results[0].describe()  # gloo may notice rank 1 left first
    with pytest.raises(RanksFailed) as failed:
        values(results)
    assert str(failed.value).startswith("rank 1 raised"), "the cause comes first: the rank that failed first"
    assert _no_rank_processes_left()


def test_ranks_blocked_in_collectives_are_reported_as_hung_with_their_stack() -> None:
    start = time.monotonic()
    results = run_ranks(_unequal_steps, 2, timeout_s=3.0)
    assert time.monotonic() - start < 3.0 + 10, "hung ranks must be stopped soon after the time limit"
    assert [r.status for r in results] == [HUNG, HUNG], [r.describe() for r in results]
    assert "rank 0 hung" in results[0].describe() and "rank 1 hung" in results[1].describe()
    if hasattr(__import__("signal"), "SIGUSR1"):
        assert "_unequal_steps" in results[0].detail, results[0].detail
    assert _no_rank_processes_left()


def test_a_rank_that_dies_and_a_value_that_cannot_travel_are_named() -> None:
    results = run_ranks(_rank_one_exits, 2, timeout_s=TIMEOUT_S)
    assert results[0].status == RETURNED and results[1].status == DIED and "code 3" in results[1].detail
    results = run_ranks(_unpicklable, 2, timeout_s=TIMEOUT_S)
    assert all(r.status == RAISED and "could not be sent back" in r.detail for r in results)
    assert _no_rank_processes_left()


def test_bad_world_size_is_refused() -> None:
    with pytest.raises(ValueError, match="world_size"):
        run_ranks(_reduce_ranks, 0)
