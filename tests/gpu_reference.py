"""Record a GPU's reference figures: run notebooks' code on a CUDA machine that has no Jupyter (maintainers).

    python -m tests.gpu_reference --profile workshop 07 08

Each notebook's code cells run in order, in a fresh Python process of their own, with the course's solutions
standing in for the exercises they import (`exercises.exNN_*` is `solutions.exNN_*` there), matplotlib drawing to no
screen, IPython's `%` lines left out, and `LOADERLAB_SAVE_REFERENCE=1`, so the notebook's last cell writes
`notebooks/reference/<module>_<gpu>.json` itself (`loaderlab.lessons.m07_device.save_reference_figures`). Only torch,
torchvision, numpy, Pillow and matplotlib are needed: what a bare GPU image has. Where Jupyter is installed,
`jupyter nbconvert --execute` with the same variable does the same with the learner's exercises.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from loaderlab.paths import REPO_ROOT

NOTEBOOKS = REPO_ROOT / "notebooks"
RUN_LIMIT_S = 1800


def notebook_for(module: str) -> Path:
    """notebooks/<module>_*.ipynb, the one notebook of that module number."""
    found = sorted(NOTEBOOKS.glob(f"{module}_*.ipynb"))
    if len(found) != 1:
        raise SystemExit(f"module {module!r}: expected one notebooks/{module}_*.ipynb, found {len(found)}")
    return found[0]


def code_cells(notebook: Path) -> list[str]:
    """The notebook's code cells as Python source, IPython's `%` and `!` lines left out."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    sources = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]
    return ["\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
            for source in sources]


def solutions_as_exercises(names: Iterable[str]) -> None:
    """Make `exercises.<name>` import `solutions.<name>` for each exercise named: the reference measures the
    course's own code. Only those the notebook names are imported (exercise 07's imports TensorFlow, which
    crashes beside torch in one process, and which a GPU image may lack)."""
    import exercises
    import solutions

    for name in sorted(set(names)):
        if (Path(solutions.__file__).parent / f"{name}.py").is_file():
            module = importlib.import_module(f"solutions.{name}")
            sys.modules[f"exercises.{name}"] = module
            setattr(exercises, name, module)


def run_notebook(notebook: Path) -> None:
    """Execute the notebook's code cells in this process, in one namespace, printing each cell's time."""
    import matplotlib

    matplotlib.use("Agg")  # before pyplot is imported: the figures go nowhere
    import matplotlib.pyplot as plt

    cells = code_cells(notebook)
    solutions_as_exercises(re.findall(r"\bex\d{2}_\w+", "\n".join(cells)))
    namespace: dict[str, object] = {"__name__": "__main__"}
    for number, source in enumerate(cells, start=1):
        start = time.perf_counter()
        print(f"--- {notebook.name}, code cell {number}", flush=True)
        exec(compile(source, f"{notebook.name}[code cell {number}]", "exec"), namespace)
        plt.close("all")
        print(f"--- code cell {number}: {time.perf_counter() - start:.1f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="+", help="module numbers whose notebooks to run, e.g. 07 08")
    parser.add_argument("--profile", default=os.environ.get("LOADERLAB_PROFILE", "workshop"))
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.in_process:
        run_notebook(notebook_for(args.modules[0]))
        return 0
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("reference figures are measured on a CUDA GPU, and this machine has none")
    environment = os.environ | {"LOADERLAB_PROFILE": args.profile, "LOADERLAB_SAVE_REFERENCE": "1",
                                "PYTHONUNBUFFERED": "1"}
    failed = []
    for module in args.modules:
        command = [sys.executable, "-m", "tests.gpu_reference", "--in-process", module]
        try:
            code = subprocess.run(command, cwd=REPO_ROOT, env=environment, timeout=RUN_LIMIT_S).returncode
        except subprocess.TimeoutExpired:
            code = f"stopped after {RUN_LIMIT_S} s"
        if code != 0:
            failed.append(f"{module} ({code})")
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
