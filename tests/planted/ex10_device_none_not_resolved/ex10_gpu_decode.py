"""Exercise 10, planted defect: gpu_decode_loader makes torch.device(device) of whatever it is given, where the
contract says None means default_device(): the default call fails."""

import torch

from loaderlab.device import decode_jpegs
from solutions.ex10_gpu_decode import *  # noqa: F403
from solutions.ex10_gpu_decode import CROP, read_batches, resize_center_crop


def decode_batch(jpegs, device, names=None):
    images = decode_jpegs(jpegs, device, names)
    if not images:
        return torch.empty((0, 3, CROP, CROP), dtype=torch.uint8, device=device)
    return torch.stack([resize_center_crop(image) for image in images])


def gpu_decode_loader(shard_dir, batch_size=64, device=None, num_workers=2):
    device = torch.device(device)  # planted: None is not resolved to default_device()
    batches = read_batches(shard_dir, batch_size, num_workers)
    try:
        for batch in batches:
            yield decode_batch(batch.jpegs, device, batch.keys), batch.labels.to(device)
    finally:
        batches.close()
