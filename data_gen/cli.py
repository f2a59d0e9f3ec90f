"""Command line: ``python -m data_gen --profile ci|workshop|full [options]``.

Exit codes: 0 done (or nothing to do), 2 bad input or a failed write, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys

from data_gen import PROFILES, default_out_dir
from data_gen.build import BuildResult, DataGenError, build_dataset, default_workers


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m data_gen",
        description="Write a local ImageNet-like ImageFolder dataset (train/, val/, dirty/, "
        "manifest.csv, dataset.json). Nothing is downloaded.",
    )
    sizes = "; ".join(
        f"{name}: {pr.train_per_class}+{pr.val_per_class} per class, {pr.corrupt} broken"
        for name, pr in PROFILES.items()
    )
    p.add_argument("--profile", required=True, choices=list(PROFILES), help=f"dataset size ({sizes})")
    p.add_argument("--out", help="output folder (default: <repo>/data/<profile>[-imbalance-R])")
    p.add_argument("--seed", type=int, default=0, help="random seed; same seed, same bytes (default 0)")
    p.add_argument("--corrupt", type=int, help="broken files in the dirty split (default: the profile's)")
    p.add_argument("--imbalance", type=float, default=1.0, help="largest/smallest train class ratio (default 1)")
    p.add_argument("--workers", type=int, help=f"processes (default: the usable cores, here {default_workers()})")
    p.add_argument("--force", action="store_true", help="delete an existing dataset at --out and rebuild it")
    return p


def _summary(result: BuildResult) -> str:
    t = result.totals
    splits = ", ".join(f"{split} {n}" for split, n in t["files_per_split"].items() if n)
    return (
        f"Wrote {t['files']} images to {result.out} ({splits}; {t['broken']} broken in dirty)\n"
        f"  total size {t['bytes'] / 1e6:.1f} MB, mean file size {t['mean_kb']:.1f} KB\n"
        f"  mean resolution {t['mean_width']:.0f}x{t['mean_height']:.0f} "
        f"(mean short side {t['mean_short_side']:.0f})\n"
        f"  wall time {t['seconds']:.1f} s on {t['workers']} worker(s)"
    )


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, build the dataset, print a summary; return the exit code."""
    args = _parser().parse_args(argv)
    out = args.out if args.out is not None else default_out_dir(args.profile, args.imbalance)
    try:
        result = build_dataset(
            args.profile, out, seed=args.seed, corrupt=args.corrupt, imbalance=args.imbalance,
            workers=args.workers, force=args.force,
        )
    except DataGenError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted: {out} is incomplete (no dataset.json); run again to rebuild it", file=sys.stderr)
        return 130
    if result.built:
        print(_summary(result))
    return 0
