"""Module 04's exercises (04 to 06), beyond what tests/test_graders.py proves for every exercise: the facts the
texts state (worker seeds, the data command), the graded steps and their TODOs, and the margins of the checks'
statistical thresholds."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import multiprocessing
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

from grader.support import dataset_samples
from loaderlab.images import linked_split
from loaderlab.paths import REPO_ROOT

EXERCISES = ("ex04_fast_dataloader", "ex05_choose_workers", "ex06_balanced_sampler")
FORK = "fork" in multiprocessing.get_all_start_methods()


# ---- erratum: what get_worker_info().seed is, with and without persistent workers ---------------

class SeedProbe(Dataset):
    """Each item: (worker id, that worker's seed, how many times worker_init_fn ran in it)."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> torch.Tensor:
        info = get_worker_info()
        return torch.tensor([info.id, info.seed, getattr(info.dataset, "inits", 0)])


def count_init(worker_id: int) -> None:
    dataset = get_worker_info().dataset
    dataset.inits = getattr(dataset, "inits", 0) + 1


def _seeds_per_epoch(persistent: bool, epochs: int = 3) -> list[set[tuple[int, int, int]]]:
    loader = DataLoader(SeedProbe(), batch_size=2, num_workers=2, persistent_workers=persistent,
                        worker_init_fn=count_init, generator=torch.Generator().manual_seed(7),
                        multiprocessing_context="fork")
    return [{tuple(row) for row in torch.cat(list(loader)).tolist()} for _ in range(epochs)]


@pytest.mark.skipif(not FORK, reason="the probe dataset lives in this test module, which spawn cannot import")
def test_worker_seed_is_drawn_each_time_the_loader_starts_workers() -> None:
    """The texts said get_worker_info().seed is 'new every epoch'; with persistent workers it is drawn once."""
    kept = _seeds_per_epoch(persistent=True)
    assert kept[0] == kept[1] == kept[2], "persistent workers keep their seed from epoch to epoch"
    assert {inits for _, _, inits in kept[0]} == {1}, "worker_init_fn runs once per persistent worker"
    fresh = _seeds_per_epoch(persistent=False)
    seeds = [{seed for _, seed, _ in epoch} for epoch in fresh]
    assert seeds[0] != seeds[1] != seeds[2], "without persistent workers each epoch starts workers with a new seed"
    assert all(len(epoch) == 2 for epoch in seeds), "one seed per worker"


@pytest.mark.parametrize("persistent", [True, False])
def test_solution_flips_differ_between_epochs_of_one_loader(persistent: bool) -> None:
    from solutions.ex04_fast_dataloader import CenterCropDataset, loader_for

    with linked_split(dataset_samples("train", 32)) as (root, _):
        dataset = CenterCropDataset(root, augment=True, seed=3)
        loader = loader_for(dataset, 8, 2, False, 3, persistent_workers=persistent)
        plain = CenterCropDataset(root)
        references = torch.stack([plain[i][0] for i in range(len(plain))])
        epochs = [torch.cat([images for images, _ in loader]) for _ in range(2)]
        del loader
    flips = [[not torch.equal(image, reference) for image, reference in zip(epoch, references)] for epoch in epochs]
    assert flips[0] != flips[1], f"persistent_workers={persistent}: two epochs flipped the same images"


def test_no_text_says_the_worker_seed_is_new_every_epoch() -> None:
    stale = re.compile(r"new\s+every\s+epoch", re.IGNORECASE)
    for path in [REPO_ROOT / folder / "ex04_fast_dataloader.py" for folder in ("exercises", "solutions")] + [
            REPO_ROOT / "grader" / "hints" / "ex04_fast_dataloader.toml",
            REPO_ROOT / "grader" / "checks" / "ex04_fast_dataloader.py"]:
        assert not stale.search(path.read_text()), f"{path.relative_to(REPO_ROOT)} still says 'new every epoch'"


# ---- erratum: the imbalanced data set is the one `make data` makes -----------------------------

def test_ex06_names_the_data_command_that_make_data_runs() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text()
    default_profile = re.search(r"^PROFILE\s*\?=\s*(\S+)", makefile, re.MULTILINE).group(1)
    data_target = makefile.split("\ndata:", 1)[1].split("\n\n", 1)[0]
    made = {f"python -m data_gen --profile {default_profile}{rest}"
            for rest in re.findall(r"-m data_gen --profile \$\(PROFILE\)(.*)", data_target)}
    for folder in ("exercises", "solutions"):
        module = importlib.import_module(f"{folder}.ex06_balanced_sampler")
        docstring = ast.get_docstring(ast.parse(Path(module.__file__).read_text())) or ""
        commands = re.findall(r"python -m data_gen --profile \S+ --imbalance \d+", " ".join(docstring.split()))
        assert folder == "solutions" or commands, "the exercise names the command that makes its data"
        if commands:
            assert commands[0] in made, f"{folder}: {commands[0]!r} is not what `make data` runs ({sorted(made)})"
        assert f"--imbalance {module.IMBALANCE}" in " ".join(made), "IMBALANCE is the ratio `make data` makes"


# ---- graded steps, TODOs and hints --------------------------------------------------------------

def test_stub_todos_give_no_code() -> None:
    """Code-level help lives in the upper hint levels; a TODO says what to build and why."""
    code = re.compile(r"\w+\([^)]*\)\.\w+|np\.random|torch\.Generator\(|\.manual_seed|Image\.|transpose\(|"
                      r"WeightedRandomSampler\(|statistics\.median")
    for exercise in EXERCISES:
        for line in (REPO_ROOT / "exercises" / f"{exercise}.py").read_text().splitlines():
            if line.strip().startswith("#"):
                assert not code.search(line), f"{exercise}: a TODO spells out code: {line.strip()}"


# ---- the checks' statistical thresholds leave right answers room --------------------------------

def test_full_shuffles_pass_and_wrong_granularities_fail_the_order_test() -> None:
    from grader.checks.ex04_fast_dataloader import _order_is_shuffled

    rng = np.random.default_rng(0)
    for _ in range(5000):
        _order_is_shuffled(rng.permutation(70).tolist(), "a full shuffle", "the file order")
    blocks = [list(range(start, min(start + 16, 70))) for start in range(0, 70, 16)]
    wrong = {"whole blocks": [i for b in rng.permutation(len(blocks)) for i in blocks[b]],
             "inside batches": [i for b in blocks for i in rng.permutation(b)]}
    for what, order in wrong.items():
        with pytest.raises(AssertionError):
            _order_is_shuffled(order, what, "the file order")


@pytest.mark.parametrize("path", ["solutions/ex05_choose_workers.py",
                                  "tests/alternatives/ex05_back_to_back/ex05_choose_workers.py"])
def test_noisy_curves_have_one_answer_whatever_the_noise(path: str) -> None:
    """The 1% noise never moves a right chooser's answer: every answer is clear of the tolerance line."""
    from grader.checks.ex05_choose_workers import NOISE, NOISY_CURVES, SyntheticCurve

    spec = importlib.util.spec_from_file_location("ex05_under_test", REPO_ROOT / path)
    chooser = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(chooser)
    for truth, outliers, repeats, answer in NOISY_CURVES:
        for seed in range(300):
            curve = SyntheticCurve(truth, outliers, NOISE, seed)
            assert chooser.choose_num_workers(curve, list(truth), repeats=repeats) == answer, (truth, seed)


def test_torch_refusal_to_draw_without_replacement_is_explained() -> None:
    from grader.checks.ex06_balanced_sampler import _explained

    def draw() -> list[int]:
        return torch.multinomial(torch.ones(3), 5, replacement=False).tolist()

    with pytest.raises(AssertionError, match="cannot draw more samples than the dataset holds"):
        _explained("an epoch of 5 draws", draw)
    with pytest.raises(ZeroDivisionError):
        _explained("anything else", lambda: 1 / 0)


def test_class_frequency_tolerance_passes_a_right_sampler_and_fails_the_imbalance() -> None:
    """4 standard deviations over 20,000 draws: a balanced sampler passes nearly always, the raw imbalance never."""
    from grader.checks.ex06_balanced_sampler import MIN_DRAWS, _check_frequencies

    folder = Counter({label: count for label, count in enumerate([20, 15, 12, 9, 7, 6, 4, 3, 3, 2])})
    rng = np.random.default_rng(0)
    failures = 0
    for _ in range(200):
        drawn = Counter(rng.integers(10, size=MIN_DRAWS).tolist())
        try:
            _check_frequencies(drawn, folder, MIN_DRAWS, "balanced")
        except AssertionError:
            failures += 1
    assert failures <= 1, f"{failures} of 200 right samplers failed"
    shares = np.array([folder[label] for label in range(10)]) / sum(folder.values())
    imbalanced = Counter(rng.choice(10, size=MIN_DRAWS, p=shares).tolist())
    with pytest.raises(AssertionError):
        _check_frequencies(imbalanced, folder, MIN_DRAWS, "imbalanced")
