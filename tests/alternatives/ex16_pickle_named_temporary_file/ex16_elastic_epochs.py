"""Exercise 16, a correct alternative: checkpoints written with the standard library's pickle into a
tempfile.NamedTemporaryFile in the checkpoint's folder, then moved over it; read back with pickle (a course's own
checkpoints only: unlike torch.load(weights_only=True), pickle runs whatever a file names)."""

import os
import pickle
import tempfile
from pathlib import Path

from solutions.ex16_elastic_epochs import *  # noqa: F403


def save_checkpoint(path, checkpoint):
    path = Path(path)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=path.name, delete=False) as out:
        try:
            pickle.dump(checkpoint, out, protocol=pickle.HIGHEST_PROTOCOL)
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
            checkpoint = pickle.load(source)
    except FileNotFoundError:
        return None
    except Exception as err:
        raise ValueError(f"{path}: not a checkpoint ({type(err).__name__}: {err})") from err
    if not isinstance(checkpoint, dict):
        raise ValueError(f"{path}: a {type(checkpoint).__name__}, not a checkpoint")
    return checkpoint
