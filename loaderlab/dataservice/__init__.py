"""Module 11 part 2's input service: decoding on other processes than the trainer's, with tf.data service.

- `job`: what a test or a notebook calls: `run_service(ServiceSpec(...), folder)` runs a trainer that consumes an
  epoch of decoded, cropped images from a tf.data service (a dispatcher and its workers) on loopback inside
  `loaderlab.sandbox`, with a worker killed on purpose where asked, and returns its `ServiceResult`: which sample keys
  arrived and when, the trainer's own CPU seconds, and the listeners the sandbox held.
- `servers`: `python -m loaderlab.dataservice.servers dispatcher|worker ...`, the servers' processes
  (`start_cluster`): each worker in one of its own, but the last of two or more in the dispatcher's.
- `trainer`: the trainer's process inside the sandbox: starts the servers, reads the epoch, strikes the fault,
  writes the ledger.
"""
