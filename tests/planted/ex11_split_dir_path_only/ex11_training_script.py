"""Planted: ShapesFolder works only when split_dir is a Path (the contract takes a Path or a str)."""

from solutions.ex11_training_script import *  # noqa: F403
from solutions.ex11_training_script import ShapesFolder as _Solution
from loaderlab.images import list_samples


class ShapesFolder(_Solution):
    def __init__(self, split_dir, train):
        self.split_dir = split_dir  # planted: no Path(split_dir)
        self.train = train
        self.classes = sorted(p.name for p in split_dir.iterdir() if p.is_dir())
        self.samples = list_samples(split_dir)
        self.targets = [label for _, label in self.samples]
