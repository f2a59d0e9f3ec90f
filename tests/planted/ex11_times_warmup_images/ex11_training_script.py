"""Planted: time_training starts the clock after the warm-up batches but counts their images too."""

import time

from solutions.ex11_training_script import *  # noqa: F403
from solutions.ex11_training_script import WARMUP_BATCHES, to_model_input, train_step


def time_training(model, optimizer, loader, device, warmup_batches=WARMUP_BATCHES):
    start, images = None, 0
    for position, (batch, labels) in enumerate(loader):
        if position == warmup_batches:
            start = time.perf_counter()
        loss = train_step(model, optimizer, to_model_input(batch, device), labels.to(device))
        images += len(labels)  # planted: the warm-up batches' images counted too
    float(loss)
    return images / (time.perf_counter() - start)
