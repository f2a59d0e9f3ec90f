"""`python -m league.child`: one entry's gate or timed pass, in a process of its own (`league.table.child_result`
starts it and reads its result: the last line that starts with RESULT_PREFIX, then JSON).

    python -m league.child local NAME check|time --root DIR --shards DIR    (league.table: the dataset's files)
    python -m league.child remote NAME check|time --setup FILE              (league.remote: from object storage)

An entry that raises is reported as crashed, with its traceback on standard error.
"""

from __future__ import annotations

import argparse
import json
import os
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from league import remote, table
from league.entries import BY_NAME, Setup


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m league.child", description=__doc__.split("\n\n")[0])
    sources = parser.add_subparsers(dest="source", required=True)
    local = sources.add_parser("local", help="an entry of the local league (league.table)")
    local.add_argument("--root", type=Path, required=True, help="the split's folder")
    local.add_argument("--shards", type=Path, required=True, help="the league's tar shards of it")
    s3 = sources.add_parser("remote", help="an entry of the league from object storage (league.remote)")
    s3.add_argument("--setup", type=Path, required=True, help="the RemoteSetup's JSON file")
    for source in (local, s3):
        source.add_argument("name", help="the entry")
        source.add_argument("mode", choices=("check", "time"), help="the gate, or one timed pass")
    args = parser.parse_args(argv)
    run: Callable[[], dict[str, Any]]
    if args.source == "local":
        run = lambda: table.run_child(BY_NAME[args.name], Setup(args.root, args.shards), args.mode)  # noqa: E731
    else:
        run = lambda: remote.run_remote_child(remote.REMOTE_BY_NAME[args.name],  # noqa: E731
                                              remote.RemoteSetup.load(args.setup), args.mode)
    try:
        result = run()
    except Exception as err:  # reported as the entry's crash, with the last line of its traceback
        traceback.print_exc()
        result = table.crashed(err)
    print(table.RESULT_PREFIX + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
    os._exit(0)  # the result is out: skip interpreter teardown, which TensorFlow's and DALI's threads can make slow
