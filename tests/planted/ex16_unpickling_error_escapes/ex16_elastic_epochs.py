"""Exercise 16, planted defect: load_checkpoint lets torch's unpickling errors out as they come."""

import io
from pathlib import Path

import torch

import solutions.ex16_elastic_epochs as honest
from solutions.ex16_elastic_epochs import *  # noqa: F403


def load_checkpoint(path):
    if not Path(path).exists():
        return honest.load_checkpoint(path)
    checkpoint = torch.load(io.BytesIO(Path(path).read_bytes()), weights_only=True)  # planted: no ValueError
    if not isinstance(checkpoint, dict):
        raise ValueError(f"{path} holds a {type(checkpoint).__name__}, not a checkpoint's dict")
    return checkpoint
