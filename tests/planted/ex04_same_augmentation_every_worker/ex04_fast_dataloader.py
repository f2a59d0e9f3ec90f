"""Planted defect: no worker_init_fn, so every worker flips with a copy of the generator made in __init__."""

from solutions.ex04_fast_dataloader import CenterCropDataset, default_num_workers, loader_for, seed_worker  # noqa: F401


def make_loader(root, batch_size=64, num_workers=None, *, shuffle=False, augment=False, seed=0):
    workers = default_num_workers() if num_workers is None else num_workers
    return loader_for(CenterCropDataset(root, augment, seed), batch_size, workers, shuffle, seed,
                      worker_init_fn=None)  # planted
