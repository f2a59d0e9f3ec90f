"""Exercise 11, planted defect: train_one_epoch steps only on full batches, so the last, shorter batch of every
epoch is never trained on."""

from solutions.ex11_training_script import *  # noqa: F401,F403
from solutions.ex11_training_script import to_model_input, train_step


def train_one_epoch(model, optimizer, loader, device):
    images_seen = 0
    full = None
    for images, labels in loader:
        full = full or len(labels)
        if len(labels) < full:  # planted: the short last batch is dropped
            continue
        train_step(model, optimizer, to_model_input(images, device), labels.to(device))
        images_seen += len(labels)
    return images_seen
