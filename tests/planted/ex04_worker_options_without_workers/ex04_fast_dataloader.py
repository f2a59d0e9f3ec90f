"""Planted defect: persistent_workers=True and a timeout always, also with num_workers=0 (DataLoader refuses them)."""

from solutions.ex04_fast_dataloader import CenterCropDataset, default_num_workers, loader_for, seed_worker  # noqa: F401


def make_loader(root, batch_size=64, num_workers=None, *, shuffle=False, augment=False, seed=0):
    workers = default_num_workers() if num_workers is None else num_workers
    return loader_for(CenterCropDataset(root, augment, seed), batch_size, workers, shuffle, seed,
                      persistent_workers=True, timeout=120.0)  # planted: not only when workers > 0
