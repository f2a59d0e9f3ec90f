"""Planted: to_model_input works only when the device is a torch.device (the contract takes a str too)."""

import torch

from solutions.ex11_training_script import *  # noqa: F403
from solutions.ex11_training_script import MEAN, STD
from loaderlab.device import mean_std_on


def to_model_input(images, device):
    images = images.to(device, non_blocking=device.type == "cuda")  # planted: device.type on a str raises
    mean, std = mean_std_on(device, MEAN, STD)
    return images.float().div_(255).sub_(mean).div_(std)
