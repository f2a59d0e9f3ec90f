"""Exercise 11, planted defect: evaluate averages each batch's accuracy, so the last, shorter batch weighs as much as
a full one."""

import torch

from solutions.ex11_training_script import *  # noqa: F401,F403
from solutions.ex11_training_script import to_model_input


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    accuracies = []
    for images, labels in loader:
        predictions = model(to_model_input(images, device)).argmax(dim=1).cpu()
        accuracies.append(float((predictions == labels).float().mean()))  # planted: a mean of means
    return sum(accuracies) / len(accuracies) if accuracies else 0.0
