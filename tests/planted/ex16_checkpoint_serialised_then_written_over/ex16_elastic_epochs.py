"""Exercise 16, planted defect: the checkpoint is serialised whole in memory first (so a failure while pickling never
touches the file), then written over the path in one write: the open empties the path before the bytes arrive."""

import io
import os

import torch

from solutions.ex16_elastic_epochs import *  # noqa: F403


def save_checkpoint(path, checkpoint):
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    with open(path, "wb") as out:  # planted: the previous checkpoint is gone from here on
        out.write(buffer.getvalue())
        out.flush()
        os.fsync(out.fileno())
