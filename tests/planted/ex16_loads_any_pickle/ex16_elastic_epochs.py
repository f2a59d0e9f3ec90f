"""Exercise 16, planted defect: checkpoints loaded with torch.load(weights_only=False), "so that optimizer states
load": every function a file's pickle names is called."""

from pathlib import Path

import torch

from solutions.ex16_elastic_epochs import *  # noqa: F403


def load_checkpoint(path):
    path = Path(path)
    if not path.exists():
        return None
    try:
        checkpoint = torch.load(path, weights_only=False)  # planted: unpickles whatever the file names
    except Exception as err:
        raise ValueError(f"{path} is not a checkpoint: {err}") from err
    if not isinstance(checkpoint, dict):
        raise ValueError(f"{path} holds a {type(checkpoint).__name__}, not a checkpoint's dict")
    return checkpoint
