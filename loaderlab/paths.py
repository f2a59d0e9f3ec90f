"""Where the course's files live. Everything resolves from the repo root, never the cwd."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
GRADER_DIR = REPO_ROOT / ".grader"
STORAGE_DIR = REPO_ROOT / "data" / "storage"  # module 10: the S3 server's files (loaderlab.storage)
DEFAULT_PROFILE = "workshop"


LOCK_POLL_S = 0.05


@contextlib.contextmanager
def exclusive_lock(lock_file: Path, timeout_s: float = 60.0) -> Iterator[None]:
    """Hold an exclusive lock on `lock_file` (created if absent) where the OS offers one, so that two processes take
    their turn; TimeoutError if another holds it for `timeout_s`. OSError where the file cannot be created."""
    try:
        import fcntl
    except ImportError:  # Windows: runs rarely overlap there
        yield
        return
    with open(lock_file, "a") as handle:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{lock_file} stayed locked by another process for {timeout_s:g} s") from None
                time.sleep(LOCK_POLL_S)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class DatasetMissing(FileNotFoundError):
    """The dataset for a profile has not been generated (or is incomplete)."""


def active_profile() -> str:
    """The dataset profile in use: $LOADERLAB_PROFILE, else 'workshop'."""
    return os.environ.get("LOADERLAB_PROFILE", DEFAULT_PROFILE)


def dataset_dir(profile: str | None = None, imbalance: float = 1.0, *, check: bool = True) -> Path:
    """The root of the generated dataset (holding train/, val/, dirty/, manifest.csv).

    Raises DatasetMissing, naming the command that makes it, when it is absent.
    """
    from data_gen import default_out_dir

    profile = profile or active_profile()
    root = default_out_dir(profile, imbalance)
    if check and not (root / "dataset.json").is_file():
        extra = f" --imbalance {imbalance:g}" if imbalance != 1 else ""
        command = "make data" if profile == DEFAULT_PROFILE and not extra else f"python -m data_gen --profile {profile}{extra}"
        state = "is incomplete (no dataset.json)" if root.exists() else "does not exist"
        raise DatasetMissing(
            f"The '{profile}' dataset at {root} {state}. Make it with `{command}` "
            f"from the repo root (it takes about a minute for 'workshop', seconds for 'ci')."
        )
    return root
