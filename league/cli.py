"""`python -m league`: the league table's command, local (`league.table`) or from object storage (`league.remote`).
Each entry's gate and timed passes run in processes of their own: `league.child`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from loaderlab.paths import GRADER_DIR, active_profile

from league import remote, table
from league.entries import BY_NAME, CEILINGS, ENTRIES


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m league", description=table.__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default=None, help="dataset profile (default: $LOADERLAB_PROFILE or workshop)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--images", type=int, default=None, help="local: default 640; s3: default the whole split")
    parser.add_argument("--source", choices=("local", "s3"), default="local",
                        help="local: the dataset's files; s3: module 10's S3 server through the proxy's "
                             f"'{remote.NETWORK_PROFILE}' profile (league.remote)")
    parser.add_argument("--entries", default=None, help=f"comma-separated, of: {', '.join(BY_NAME)} (local); "
                        f"{', '.join(remote.REMOTE_BY_NAME)} (s3)")
    parser.add_argument("--out", type=Path, default=None,
                        help="the JSON (default .grader/league.json, or league-s3.json); the PNG goes beside it")
    args = parser.parse_args(argv)
    s3 = args.source == "s3"
    roster = remote.REMOTE_BY_NAME if s3 else BY_NAME
    default = [e.name for e in remote.REMOTE_BY_NAME.values()] if s3 else [c.name for c in CEILINGS] + [e.name for e in ENTRIES]
    names = args.entries.split(",") if args.entries else default
    unknown = [n for n in names if n not in roster]
    if unknown:
        parser.error(f"unknown entries {unknown} for --source {args.source}; choose from {', '.join(roster)}")
    if args.rounds < 1 or (args.images is not None and args.images < 1):
        parser.error("--rounds and --images must be at least 1")
    profile = args.profile or active_profile()
    if s3:
        league = remote.run_remote_league(profile, args.rounds, args.images, names)
        print(remote.table(league))
    else:
        league = table.run_league(profile, args.rounds, args.images or table.LOCAL_IMAGES, names)
        print(table.table(league))
    missing = [r for r in league["rows"] if r["status"] == "not installed"]
    if missing:
        print("\nNot installed: " + "; ".join(f"{r['name']} ({r['note']})" for r in missing))
    args.out = args.out or GRADER_DIR / ("league-s3.json" if s3 else "league.json")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(league, indent=2))
    import matplotlib

    matplotlib.use("Agg")  # a command: the chart goes to a file, never to a window
    png = args.out.with_suffix(".png")
    figure = table.league_bars(league).figure
    figure.tight_layout()
    figure.savefig(png, dpi=100)
    print(f"\nSaved {args.out} and {png}")

