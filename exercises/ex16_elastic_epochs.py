"""Exercise 16: an elastic epoch under torchrun.

A job on several nodes fails in pieces: one rank is killed (out of memory, a preempted GPU), a whole node drops out
(its machine rebooted, its network gone), a rank hangs in a collective. torchrun's answer is blunt: it stops every
rank and starts them all again from the script's first line, up to --max-restarts times, and with --nnodes=MIN:MAX
it goes on with the nodes it still has: a world of 4 ranks may come back as a world of 2. So a training script's
loader side must read its rank and world size from torchrun's environment each time it starts (never a value left
from an earlier attempt), bring the epoch's position back from the last checkpoint (a checkpoint a kill may have
interrupted mid-write), and split the REST of the epoch again over the ranks of the new attempt: every sample of the
epoch exactly once, whatever the world size did in between. And no rank may wait forever for a peer that is gone.

Build the pieces below in steps; the grader reports each one:
  1. the plan (TODO(ex16, step 1)): world_from_environment, EpochPlan.order / steps / position_after, graded in one
     process (steps from the epoch's start and from positions the same world size reaches);
  2. a rank killed (TODO(ex16, step 2)): state_dict / position_from, save_checkpoint / load_checkpoint, graded in one
     process (a save SIGKILLed mid-write among them);
  3. a node lost (TODO(ex16, step 3)): the rest of the epoch split again over another number of ranks: steps() from
     a position another world size reached, in one process;
  4. under torchrun (TODO(ex16, step 4)): STEP_TIMEOUT_S and join (the call join makes, recorded in one process),
     then real torchrun jobs of two nodes on this machine, through the course's rank script (below): every sample
     once; a rank SIGKILLed mid-epoch; a node lost; a rank that hangs, given up within STEP_TIMEOUT_S (nothing of
     yours may keep a rank from ending when torchrun stops it with SIGTERM: torchrun waits 30 s before SIGKILL, and
     the restart waits with it). The jobs need every piece above; they run on Linux (elsewhere they are skipped,
     with the reason);
  5. bad input (TODO(ex16, step 5)): a broken environment, bad arguments, a state or a checkpoint file that does not
     fit are refused with ValueError, saying what.
Grade: `pytest grader/test_ex16_elastic_epochs.py`. Hints: `make hint EX=ex16`.

The course's rank script (`loaderlab.elastic.rank`, run by torchrun) calls these names, each attempt:
world = world_from_environment(); join(world); checkpoint = load_checkpoint(path); plan = EpochPlan(...);
start = plan.position_from(checkpoint["loader"]) if checkpoint else 0; for step, samples in
enumerate(plan.steps(world.world_size, world.rank, start)): train on them, and every few steps rank 0 calls
save_checkpoint(path, {..., "loader": plan.state_dict(plan.position_after(start, step + 1, world.world_size))}).

STEP_TIMEOUT_S is a number of seconds from 5 s to 60 s (checked): long enough for ranks that start a few seconds
apart to meet, short enough that a hung peer does not hold the others for long (gloo's default is 30 minutes).
"""

from __future__ import annotations

import os  # noqa: F401  (you will need these)
from datetime import timedelta  # noqa: F401
from pathlib import Path
from typing import Any

import torch  # noqa: F401
import torch.distributed as dist  # noqa: F401

from loaderlab.elastic.world import World  # where this process stands: rank, world_size, local_rank, restart_count

# TODO(ex16, step 4): how long a rank waits for its peers (at the rendezvous, in a collective) before it fails, in
# seconds: long enough for healthy ranks that start a few seconds apart, short enough that a hung peer is noticed soon.
STEP_TIMEOUT_S: float | None = None


def world_from_environment() -> World:
    """This process's World, from torchrun's variables RANK, WORLD_SIZE, LOCAL_RANK and TORCHELASTIC_RESTART_COUNT.

    Contract (the grader checks each point):
    - the variables are read when called, never at import: the same process called again after the environment
      changed gives the new world;
    - ValueError naming the variable when one of the four is missing or is not an int (torchrun always sets all four,
      so a missing one is an error, not a default);
    - ValueError when the rank is outside [0, world_size), the world size is below 1 or the local rank is negative.
    """
    # TODO(ex16, step 1): read torchrun's four variables each time this is called: every attempt of the job is a new
    # start of the script, possibly with another rank and world size than the attempt before.
    # TODO(ex16, step 5): refuse, with ValueError naming the variable, an environment that is not torchrun's.
    raise NotImplementedError("TODO(ex16, step 1) in exercises/ex16_elastic_epochs.py: world_from_environment")


def join(world: World) -> None:
    """Join this attempt's default process group.

    Contract (the grader checks each point): one call of torch.distributed.init_process_group with backend "gloo",
    init_method "env://" (torchrun's MASTER_ADDR and MASTER_PORT), the rank and world size of `world` (not read from
    the environment again), and timeout=timedelta(seconds=STEP_TIMEOUT_S), and nothing else (in one process the grader
    records that call without making it; the torchrun job makes it).
    """
    # TODO(ex16, step 4): join with a timeout of your own: gloo's default is 30 minutes, and a rank whose peer hung
    # (or died without the launcher noticing) waits that long in its next collective, holding the whole job.
    raise NotImplementedError("TODO(ex16, step 4) in exercises/ex16_elastic_epochs.py: join")


class EpochPlan:
    """One epoch of `num_samples` samples, in an order drawn from (seed, epoch), split into steps over any number of
    ranks from any position; `dataset` names the data (an id), so that a state saved for other data is refused.

    Contract (the grader checks each point):
    - ValueError for num_samples < 0, batch_size < 1 or epoch < 0;
    - `order()` is a permutation of range(num_samples) drawn from (seed, epoch) alone: the same on every rank, in
      every attempt, in every process; another epoch or another seed gives another order;
    - `steps(world_size, rank, start)`: this rank's samples for each remaining step, from position `start` of the
      order (the samples before it are done). THE RULE, with W = world_size and B = batch_size: step s takes the
      block order[start + s*W*B : start + (s+1)*W*B], and rank r takes the r-th of W contiguous parts of the block:
      B samples each for a full block; for the last, short block, parts whose sizes differ by at most one, the
      larger first (as numpy.array_split splits it). So every rank has the same number of steps,
      ceil((num_samples - start) / (W*B)) (none when start == num_samples), a part may be empty, and reading the
      steps in (step, rank) order gives order[start:]. A step is a list of ints. ValueError for start outside
      [0, num_samples], rank outside [0, world_size), world_size < 1;
    - `position_after(start, steps, world_size)`: the position once `steps` steps from `start` are done on
      `world_size` ranks, min(num_samples, start + steps*W*B): the samples of those steps are order[start:position].
      ValueError for a negative start or steps, a start past num_samples, more steps than remain;
    - `state_dict(position)` returns a NEW dict of plain data (it goes through json.dumps and json.loads into a
      checkpoint) holding the position and what position_from needs to refuse a state that does not fit;
    - `position_from(state)` returns the position of a state saved by a plan of the same dataset, num_samples, seed
      and epoch; the batch size (and the world size) may differ: the rest is split again. ValueError, saying what
      does not match, for another dataset, num_samples, seed or epoch, a missing key, a value of the wrong type (a
      bool is not an int), a position outside [0, num_samples], a state that is not a dict.
    """

    def __init__(self, num_samples: int, batch_size: int, seed: int, epoch: int, dataset: str) -> None:
        # TODO(ex16, step 1): keep the arguments.
        # TODO(ex16, step 5): refuse, with ValueError, what can be no epoch at all.
        raise NotImplementedError("TODO(ex16, step 1) in exercises/ex16_elastic_epochs.py: EpochPlan.__init__")

    def order(self) -> list[int]:
        # TODO(ex16, step 1): the epoch's permutation, drawn again identically by every rank and every attempt: it
        # may depend on nothing a freshly started process lacks.
        raise NotImplementedError("TODO(ex16, step 1) in exercises/ex16_elastic_epochs.py: order")

    def steps(self, world_size: int, rank: int, start: int) -> list[list[int]]:
        # TODO(ex16, steps 1, 3): this rank's part of each step, following THE RULE from `start`. After a node is lost,
        # `start` is where the job got on another world size: the rest must be split again from there, not taken as
        # "my share, less what I had done".
        # TODO(ex16, step 5): refuse, with ValueError, a start, rank or world size that cannot be.
        raise NotImplementedError("TODO(ex16, step 1) in exercises/ex16_elastic_epochs.py: steps")

    def position_after(self, start: int, steps: int, world_size: int) -> int:
        # TODO(ex16, step 1): where the epoch stands once these steps are done: what a checkpoint must record.
        # TODO(ex16, step 5): refuse, with ValueError, arguments that no run could have reached.
        raise NotImplementedError("TODO(ex16, step 1) in exercises/ex16_elastic_epochs.py: position_after")

    def state_dict(self, position: int) -> dict[str, Any]:
        # TODO(ex16, step 2): a new dict of plain data: the position, and what tells a state of this epoch of this
        # data from another.
        raise NotImplementedError("TODO(ex16, step 2) in exercises/ex16_elastic_epochs.py: state_dict")

    def position_from(self, state: dict[str, Any]) -> int:
        # TODO(ex16, step 2): the position a state holds, saved by a plan with maybe another batch size.
        # TODO(ex16, step 5): first refuse, with ValueError saying what does not match, a state that does not fit.
        raise NotImplementedError("TODO(ex16, step 2) in exercises/ex16_elastic_epochs.py: position_from")


def save_checkpoint(path: Path, checkpoint: dict[str, Any]) -> None:
    """Write `checkpoint` (a dict of tensors, state dicts and plain data) to `path`, in a folder that exists.

    Contract (the grader checks each point): when it returns, the checkpoint is whole at `path` (the rank script then
    records the step as committed, and a kill right after must not lose it); a SIGKILL at any moment of the save
    leaves at `path` either the previous checkpoint whole or the new one whole (the grader kills a save while it
    serialises the checkpoint, and another the moment the path changes, while a large checkpoint's bytes are
    written); a completed save leaves nothing else beside `path` (no temporary file); load_checkpoint(path) gives
    back what was saved.
    """
    # TODO(ex16, step 2): a rank can be killed while it writes, and torchrun then restarts every rank from this very
    # file: it must never be seen half written.
    raise NotImplementedError("TODO(ex16, step 2) in exercises/ex16_elastic_epochs.py: save_checkpoint")


def load_checkpoint(path: Path) -> dict[str, Any] | None:
    """The checkpoint saved at `path`, or None where there is no file at `path` (the first attempt of a job).

    Contract (the grader checks each point): tensors, an optimizer's state dict and plain data come back as saved;
    a file that is not a checkpoint (garbage, a truncated checkpoint, a saved object that is not a dict) raises
    ValueError naming the path, never an unpickling error of another type; so does a file whose pickle names a
    function to call (a pickle can name any), and nothing it names runs; the file is left as it was.
    """
    # TODO(ex16, step 2): the first attempt has no checkpoint; every later one resumes from it.
    # TODO(ex16, step 5): a file that is not a checkpoint gets one clear error, with its path. Load only what a
    # checkpoint holds (tensors, dicts, lists, numbers, strings): unpickling a file can run any code it names.
    raise NotImplementedError("TODO(ex16, step 2) in exercises/ex16_elastic_epochs.py: load_checkpoint")
