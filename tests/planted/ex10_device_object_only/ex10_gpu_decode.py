"""Exercise 10, planted defect: gpu_decode_loader reads device.type, so it works only when the device is a
torch.device (the contract takes a str too)."""

from solutions.ex10_gpu_decode import *  # noqa: F403
from solutions.ex10_gpu_decode import gpu_decode_loader as _honest


def gpu_decode_loader(shard_dir, batch_size=64, device=None, num_workers=2):
    if device is not None and device.type not in ("cpu", "cuda", "mps"):  # planted: a str has no .type
        raise ValueError(f"unsupported device {device}")
    return _honest(shard_dir, batch_size, device, num_workers)
