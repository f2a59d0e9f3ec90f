"""What the checks of a loader's saved state share (exercises 13 and 15): the state through JSON, as a checkpoint
file gives it back, a value of another type for a field, and a refused state that must leave the loader as it was."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from grader.support import raised_by, within


def state_through_json(state: Any, when: str) -> Any:
    """The state after a trip through JSON, as a checkpoint file gives it back."""
    try:
        text = json.dumps(state)
    except (TypeError, ValueError) as err:
        raise AssertionError(
            f"state_dict() {when} is not plain data: json.dumps fails with {type(err).__name__}: {err}. A checkpoint "
            "must survive a file and another process (and another torch version): keep ints and strings (the epoch, "
            "the seed, how far the loop got), never a tensor, a generator's state or the sampler itself.") from None
    return json.loads(text)


def wrong_type(value: Any) -> Any:
    """A value of another type than a state field's: a str for an int, an int for a str, else a str."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 12345 if isinstance(value, str) else "not this"
    return str(value)


def refusal(loader: Any, bad: Any, what: str, rest_changed: Callable[[], str | None] | None = None
            ) -> BaseException | None:
    """What `loader.load_state_dict(bad)` raised (None: it accepted it). A refusal must leave the loader as it was:
    the same state_dict() after as before and, where `rest_changed` is given, the same rest (it says how the next
    iteration differs from the rest the loader held, None where it does not)."""
    before = state_through_json(within(10, "state_dict()", loader.state_dict), "before a refused load")

    error = within(10, f"load_state_dict of {what}", lambda: raised_by(lambda: loader.load_state_dict(bad)))
    if error is None:
        return None
    after = state_through_json(within(10, "state_dict()", loader.state_dict), "after a refused load")
    changed = f"state_dict() was {before} before and {after} after" if after != before else None
    if changed is None and rest_changed is not None:
        changed = rest_changed()
    assert changed is None, (
        f"load_state_dict refused {what} with {type(error).__name__}: {error}, but changed the loader before refusing "
        f"it: {changed}. A state that does not fit must leave the loader as it was (the caller may catch the error "
        "and go on with what it has): check the whole state first, then assign.")
    return error
