"""Module 11's elastic job: a training job under the real launcher, torchrun, on one machine.

- `job`: what a check or a notebook calls: `run_job(JobSpec(...), folder)` runs a job of several nodes (torchrun
  agents) on loopback inside `loaderlab.sandbox`, with failures on purpose (`Fault`), and returns its `JobResult`: the
  ranks' ledger of what each trained in which step, read back as attempts and committed steps.
- `controller`: the job's own process inside the sandbox: the rendezvous store, the agents, the faults, a timeline.
- `world`: where a rank stands in the current attempt (`World`), the type exercise 16's hooks return;
- `rank`: the training script torchrun starts on every rank: a small model trained over the epoch that the hooks
  module (exercise 16's API) plans, checkpointed through the hooks, every step written to the ledger.
"""
