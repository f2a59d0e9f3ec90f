"""loaderlab.lessons.m09_resume, what notebook 09's section on resuming mid-epoch measures, and the torchdata behaviour that
section's text states (so that a torchdata upgrade that changes it fails here, not silently in the prose)."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from torch.utils.data import DataLoader

from loaderlab.lessons import m09_resume


def test_reads_are_counted_across_dataloader_workers() -> None:
    dataset = m09_resume.CountingReads(12)
    got = [i for batch in DataLoader(dataset, batch_size=4, num_workers=2, timeout=60) for i in batch.tolist()]
    assert sorted(got) == list(range(12)) and dataset.reads == 12
    dataset.reset_reads()
    assert dataset.reads == 0


def test_the_sampler_runs_ahead_by_the_batches_in_flight_and_not_without_workers() -> None:
    dataset = m09_resume.CountingReads(48)
    assert all(received == handed_out for received, handed_out in m09_resume.sampler_lead(dataset, 4, 0))
    with_workers = m09_resume.sampler_lead(dataset, 4, 2)
    assert [received for received, _ in with_workers] == list(range(4, 49, 4))
    in_flight = 2 * 2 * 4  # workers x default prefetch_factor x batch size
    assert all(handed_out == min(48, received + in_flight) for received, handed_out in with_workers)


def test_epoch_order_is_a_permutation_drawn_from_seed_and_epoch_alone() -> None:
    order = m09_resume.epoch_order(20, seed=1, epoch=2)
    assert sorted(order) == list(range(20))
    torch.manual_seed(123)  # the global generator must not matter
    assert m09_resume.epoch_order(20, seed=1, epoch=2) == order
    assert m09_resume.epoch_order(20, seed=1, epoch=3) != order
    assert m09_resume.epoch_order(20, seed=2, epoch=2) != order


def test_both_resumes_deliver_the_rest_and_only_the_fast_forward_reads_the_skipped_samples() -> None:
    dataset = m09_resume.CountingReads(32)
    order = m09_resume.epoch_order(32, seed=0, epoch=1)
    rest = [order[i:i + 4] for i in range(24, 32, 4)]
    fast = m09_resume.resume(dataset, 4, seed=0, epoch=1, received=24, fast_forward=True)
    offset = m09_resume.resume(dataset, 4, seed=0, epoch=1, received=24, fast_forward=False)
    assert fast["batches"] == offset["batches"] == rest
    assert (fast["reads"], offset["reads"]) == (32, 8)
    with pytest.raises(ValueError, match="whole number of batches"):
        m09_resume.resume(dataset, 4, seed=0, epoch=1, received=6, fast_forward=False)


def test_flatten_names_every_leaf_by_its_path_and_describe_sizes_tensors() -> None:
    assert m09_resume.flatten({"a": {"b": 1, "c": {"d": None}}, "e": {}}) == {"a.b": 1, "a.c.d": None, "e": {}}
    assert m09_resume.describe(torch.zeros(10, dtype=torch.uint8)) == "tensor of 10 uint8 (10 bytes)"
    assert m09_resume.describe(3) == "3"


def test_stateful_dataloader_behaves_as_notebook_09_says() -> None:
    """Resumes the rest with the same worker count, counting received samples; refuses another worker count with an
    AssertionError; its state holds a tensor, so JSON refuses it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="'set_vital' is deprecated")
        from torchdata.stateful_dataloader import StatefulDataLoader

        def loader(dataset, num_workers):
            return StatefulDataLoader(dataset, batch_size=4, shuffle=True, num_workers=num_workers,
                                      generator=torch.Generator().manual_seed(0), timeout=60)

        dataset = m09_resume.CountingReads(24)
        whole = [batch.tolist() for batch in loader(dataset, 2)]
        first = loader(dataset, 2)
        iterator = iter(first)
        for _ in range(2):
            next(iterator)
        state = first.state_dict()
        del iterator, first
        assert m09_resume.flatten(state)["_snapshot._main_snapshot._sampler_iter_state.samples_yielded"] == 8
        with pytest.raises(TypeError):
            json.dumps(state)
        resumed = loader(dataset, 2)
        resumed.load_state_dict(state)
        dataset.reset_reads()
        assert [batch.tolist() for batch in resumed] == whole[2:] and dataset.reads == 16
        other = loader(dataset, 1)
        other.load_state_dict(state)
        with pytest.raises(AssertionError):
            list(other)
