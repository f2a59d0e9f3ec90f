"""What the checks of the readers that yield samples share (exercises 08, 14 and 15): the decode they hand to the
learner's reader, a yielded sample taken apart, and bad input that must raise an error naming what and where."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from grader.support import within


def sha256_decode(data: bytes) -> str:
    """A decode the checks hand to the learner's readers: the sha256 hex digest of the sample's bytes (cheap to send
    back from a worker, and it tells whether the reader gave the decode the bytes as stored). Top level: picklable."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        return f"decode was given {type(data).__name__}, not the sample's bytes"
    return hashlib.sha256(data).hexdigest()


def unpack_sample(item: Any, what: str, contract: str) -> tuple[str, Any, Any]:
    """(key, data, label) of what a reader yielded, which must be a named tuple with those fields; `contract` says
    what the exercise yields ("ShardSample(key, data, label)"). A label a DataLoader made a 0-d tensor is its number."""
    assert isinstance(item, tuple) and len(item) == 3 and all(hasattr(item, f) for f in ("key", "data", "label")), (
        f"{what}: yielded {type(item).__name__} {str(item)[:80]}; yield {contract}.")
    key, data, label = item
    if hasattr(label, "item"):
        label = label.item()
    return key, data, label


def unpack_remote_sample(item: Any, what: str) -> tuple[str, Any, int]:
    """`unpack_sample` for a `RemoteSample` (exercises 14 and 15), its label as an int."""
    key, data, label = unpack_sample(item, what, "RemoteSample(key, data, label)")
    return key, data, int(label)


def expect_error(run: Callable[[], Any], what: str, names: Sequence[str], silent: str, timeout_s: float) -> None:
    """`run` must raise, within `timeout_s`, an error whose message holds every one of `names` (what failed and
    where: the shard, key or folder, the endpoint's URL); `silent` says why ending without an error is wrong."""
    try:
        outcome = within(timeout_s, what, run)
    except (AssertionError, NotImplementedError):
        raise
    except Exception as err:
        missing = [name for name in names if name not in str(err)]
        assert not missing, (f"{what} raised {type(err).__name__}: {str(err)[:300]}; the message must name "
                             f"{' and '.join(repr(n) for n in names)}: what failed and where.")
    else:
        got = f" (it returned a list of {len(outcome)})" if isinstance(outcome, list) else ""
        raise AssertionError(f"{what} raised no error{got}: {silent}")
