"""One rank of the elastic job: the training script torchrun starts, `python -m loaderlab.elastic.rank FOLDER`.

torchrun starts it again from its first line on every restart, so everything a rank knows it learns here: its rank
and world from torchrun's environment, the epoch's position from the last checkpoint, its share of the rest of the
epoch from the plan. All of that is the hooks module's (exercise 16's API, named in the spec); this script owns the
training itself (a small linear model whose gradients the ranks average with all_reduce), the faults that strike a
rank from within (`hang_rank`), and the ledger.

The ledger: one JSON-lines file per process, `ledger/<pid>.jsonl`, one record per event, each with the attempt (rank
0's pid, the same on every rank of one start), the rank, the world size, torchrun's restart count and the time:
- `start`: the checkpoint this attempt begins from (`loaded_step`, `loaded_position`; 0 and 0 for none), and when
  the process was created (`created_t`), reached this script's first line (`main_t`, after its imports) and joined
  the group (`joined_t`): what a restart costs, piece by piece;
- `begin`: a step is about to be trained, with this rank's samples in it (the controller strikes its faults on
  these). Written before the step's all_reduce: a checkpoint after step s means every rank took part in it, so every
  rank's samples of every step a checkpoint covers are in the ledger, whenever a rank is killed;
- `step`: the step trained;
- `commit`: rank 0 saved a checkpoint after `step`, at `position` of the epoch, in `save_s` seconds;
- `end`: the rank finished the epoch.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path
from types import ModuleType

import psutil
import torch
import torch.distributed as dist

from loaderlab.elastic.job import CHECKPOINT_FILE, LEDGER_FOLDER, SPEC_FILE, JobSpec
from loaderlab.ledger import Ledger

FEATURES = 8
LEARNING_RATE = 0.05
HANG_S = 3600.0     # a hung rank sleeps this long: torchrun or the job's time limit ends it first


def features(samples: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Each sample's inputs and target, from its index alone (the same on every rank and every attempt)."""
    index = torch.tensor(samples, dtype=torch.float32).reshape(-1, 1)
    inputs = torch.sin(index * torch.arange(1, FEATURES + 1) * 0.37)
    target = inputs @ torch.linspace(-1.0, 1.0, FEATURES) + 0.1 * torch.cos(index.squeeze(1))
    return inputs, target


def train_step(model: torch.nn.Linear, optimizer: torch.optim.Optimizer, samples: list[int]) -> None:
    """One data-parallel step: this rank's summed gradient and sample count, all-reduced, then the mean applied."""
    optimizer.zero_grad()
    if samples:
        inputs, target = features(samples)
        ((model(inputs).squeeze(1) - target) ** 2).sum().backward()
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]
    flat = torch.cat([g.reshape(-1) for g in grads] + [torch.tensor([float(len(samples))])])
    dist.all_reduce(flat)
    count = max(flat[-1].item(), 1.0)
    offset = 0
    for parameter in model.parameters():
        parameter.grad = flat[offset:offset + parameter.numel()].reshape(parameter.shape) / count
        offset += parameter.numel()
    optimizer.step()


def hangs_here(folder: Path, spec: JobSpec, rank: int, step: int) -> bool:
    """Whether this rank is the one a `hang_rank` fault stops at this step: the first to get there, once a job."""
    for number, fault in enumerate(spec.faults):
        if fault.kind == "hang_rank" and fault.rank == rank and fault.at_step == step:
            try:
                (folder / f"struck-{number}").touch(exist_ok=False)
                return True
            except FileExistsError:
                return False
    return False


def run(folder: Path, hooks: ModuleType, spec: JobSpec, main_t: float) -> None:
    world = hooks.world_from_environment()
    hooks.join(world)
    joined_t = time.time()
    attempt = torch.tensor([os.getpid() if world.rank == 0 else 0], dtype=torch.int64)
    dist.broadcast(attempt, src=0)
    ledger = Ledger(folder / LEDGER_FOLDER / f"{os.getpid()}.jsonl", pid=os.getpid(), attempt=int(attempt.item()),
                    rank=world.rank, world=world.world_size, restart=world.restart_count)
    torch.manual_seed(spec.seed)
    model = torch.nn.Linear(FEATURES, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=0.9)
    plan = hooks.EpochPlan(spec.num_samples, spec.batch_size, spec.seed, spec.epoch, spec.dataset)
    checkpoint = hooks.load_checkpoint(folder / CHECKPOINT_FILE)
    position, step = 0, 0
    if checkpoint is not None:
        position, step = plan.position_from(checkpoint["loader"]), checkpoint["step"]
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
    ledger.add("start", loaded_step=step, loaded_position=position, created_t=psutil.Process().create_time(),
               main_t=main_t, joined_t=joined_t)
    steps = plan.steps(world.world_size, world.rank, position)
    for done, samples in enumerate(steps, start=1):
        step += 1
        ledger.add("begin", step=step, samples=samples)
        if hangs_here(folder, spec, world.rank, step):
            time.sleep(HANG_S)
        if spec.slow_input and spec.slow_input[0] == world.rank:
            time.sleep(spec.slow_input[1])
        train_step(model, optimizer, samples)
        time.sleep(spec.step_time_s)
        ledger.add("step", step=step)
        if world.rank == 0 and (done % spec.checkpoint_every == 0 or done == len(steps)):
            committed = plan.position_after(position, done, world.world_size)
            saving = time.perf_counter()
            hooks.save_checkpoint(folder / CHECKPOINT_FILE, {"loader": plan.state_dict(committed), "step": step,
                                                             "model": model.state_dict(),
                                                             "optimizer": optimizer.state_dict()})
            ledger.add("commit", step=step, position=committed, save_s=time.perf_counter() - saving)
    ledger.add("end", weights=[p.detach().reshape(-1).tolist() for p in model.parameters()])
    dist.destroy_process_group()


def main() -> None:
    main_t = time.time()
    folder = Path(sys.argv[1])
    spec = JobSpec.from_json((folder / SPEC_FILE).read_text())
    sys.path[:0] = [str(Path(entry).resolve()) for entry in spec.path]
    run(folder, importlib.import_module(spec.hooks), spec, main_t)


if __name__ == "__main__":
    main()
