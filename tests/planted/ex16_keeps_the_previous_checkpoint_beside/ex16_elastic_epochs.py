"""Exercise 16, planted defect: each save keeps a copy of the previous checkpoint beside the path "in case", then
moves the new one over it (atomic): every save leaves a file the contract says it must not."""

import shutil
from pathlib import Path

from solutions.ex16_elastic_epochs import *  # noqa: F403
from solutions.ex16_elastic_epochs import save_checkpoint as _save


def save_checkpoint(path, checkpoint):
    path = Path(path)
    if path.exists():
        shutil.copyfile(path, path.with_name(path.name + ".previous"))  # planted: a file left beside the path
    _save(path, checkpoint)
