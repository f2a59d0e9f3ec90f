"""What the checks that run real ranks share (exercises 12 and 15): the ranks' results turned into the check's
outcome."""

from __future__ import annotations

from collections.abc import Sequence

from loaderlab.distributed import RankResult, RanksFailed


def rank_failure(results: Sequence[RankResult], what: str, advice: str) -> AssertionError | NotImplementedError:
    """A rank that raised NotImplementedError reads as not started; anything else fails with every rank's story."""
    for result in results:
        if "NotImplementedError" in result.detail:
            line = next((l for l in reversed(result.detail.splitlines()) if "NotImplementedError" in l), "")
            return NotImplementedError(line.split("NotImplementedError:", 1)[-1].strip())
    return AssertionError(f"{what}: {advice}\n{RanksFailed(results)}")
