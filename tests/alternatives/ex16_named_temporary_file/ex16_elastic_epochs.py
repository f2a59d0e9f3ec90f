"""Exercise 16, a correct alternative: checkpoints written by torch.save into a tempfile.NamedTemporaryFile in the
checkpoint's folder, then moved over it; read back by torch.load(weights_only=True) from an open file. (The standard
library's pickle would run whatever a file names, and a tensor pickled by it is rebuilt through torch.load with
weights_only=False: no safe route.)"""

import os
import tempfile
from pathlib import Path

import torch

from solutions.ex16_elastic_epochs import *  # noqa: F403


def save_checkpoint(path, checkpoint):
    path = Path(path)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=path.name, delete=False) as out:
        try:
            torch.save(checkpoint, out)
            out.flush()
            os.fsync(out.fileno())
        except BaseException:
            os.unlink(out.name)
            raise
    os.replace(out.name, path)


def load_checkpoint(path):
    path = Path(path)
    try:
        with open(path, "rb") as source:
            checkpoint = torch.load(source, weights_only=True)
    except FileNotFoundError:
        return None
    except Exception as err:
        raise ValueError(f"{path}: not a checkpoint ({type(err).__name__}: {err})") from err
    if not isinstance(checkpoint, dict):
        raise ValueError(f"{path}: a {type(checkpoint).__name__}, not a checkpoint")
    return checkpoint
