"""For the tests of what stops with its owner: kill the owner with SIGKILL, the one way nothing of it runs to stop its
children, and see that its child went too."""

from __future__ import annotations

import subprocess

import psutil


def assert_child_gone_with_its_killed_owner(owner: subprocess.Popen, within_s: float) -> None:
    """`owner` prints the pid of a child it started (or several, space-separated) as its first line of output: kill
    the owner with SIGKILL, and fail (psutil.TimeoutExpired) unless every one of them is gone within `within_s`."""
    try:
        children = [psutil.Process(int(pid)) for pid in owner.stdout.readline().split()]
        owner.kill()
        owner.wait(within_s)
        for child in children:
            child.wait(within_s)
    finally:
        owner.kill()
        owner.stdout.close()
