"""Module 11 part 2's second engine: Ray Data decoding on worker processes and streaming the epoch to trainer ranks.

- `job`: what a notebook or a test calls: `run_ray_epochs([RayEpoch(...)], folder)` starts a local Ray cluster
  inside `loaderlab.sandbox` (loopback its only interface), reads the epochs one after the other through
  `streaming_split`, with a worker killed mid-task where asked, and returns each epoch's `RayResult`: the keys each
  rank received, every attempt of every map task, the listeners the sandbox held.
- `driver`: the driver's process inside the sandbox (`python -m loaderlab.raydata.driver FOLDER`): starts Ray, reads
  the epochs, writes the ledgers, stops Ray.
"""
