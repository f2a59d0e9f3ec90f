"""Module 11 part 2's input service: decoding on other processes than the trainer's, with tf.data service.

- `job`: what a test or a notebook calls: `run_service(ServiceSpec(...), folder)` runs a trainer that consumes an
  epoch of decoded, cropped images from a tf.data service (a dispatcher and worker processes) on loopback inside
  `loaderlab.sandbox`, with a worker killed on purpose where asked, and returns its `ServiceResult`: which sample keys
  arrived and when, the trainer's own CPU seconds, and the listeners the sandbox held.
- `servers`: `python -m loaderlab.dataservice.servers dispatcher|worker ...`, one tf.data service server per process.
- `trainer`: the trainer's process inside the sandbox: starts the servers, reads the epoch, strikes the fault,
  writes the ledger.
"""
