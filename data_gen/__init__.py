"""Make a local ImageNet-like ImageFolder dataset (nothing is downloaded).

Run ``python -m data_gen --profile ci|workshop|full``; call
:func:`data_gen.build.build_dataset` from Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

CLASSES: tuple[str, ...] = (
    "circles",
    "crosses",
    "grid",
    "rings",
    "spirals",
    "squares",
    "stripes",
    "triangles",
    "waves",
    "zigzag",
)
"""Class names in label order; sorted, so label == ImageFolder's class index."""


@dataclass(frozen=True)
class Profile:
    """Dataset size: images per class in train and val, broken files in dirty."""

    train_per_class: int
    val_per_class: int
    corrupt: int


PROFILES: dict[str, Profile] = {
    "ci": Profile(train_per_class=20, val_per_class=5, corrupt=12),
    "workshop": Profile(train_per_class=900, val_per_class=100, corrupt=40),
    "full": Profile(train_per_class=4500, val_per_class=500, corrupt=100),
}


def default_out_dir(profile: str, imbalance: float = 1.0) -> Path:
    """Where a profile is written unless ``--out`` says otherwise."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {sorted(PROFILES)}")
    name = profile if imbalance == 1 else f"{profile}-imbalance-{imbalance:g}"
    return REPO_ROOT / "data" / name


assert list(CLASSES) == sorted(CLASSES), "CLASSES must stay sorted"

__all__ = ["CLASSES", "PROFILES", "Profile", "REPO_ROOT", "default_out_dir"]
