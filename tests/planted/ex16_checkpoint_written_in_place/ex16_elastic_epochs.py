"""Exercise 16, planted defect: the checkpoint is written in place, over the previous one."""

import torch

from solutions.ex16_elastic_epochs import *  # noqa: F403


def save_checkpoint(path, checkpoint):
    torch.save(checkpoint, path)  # planted: the path is emptied first, then written
