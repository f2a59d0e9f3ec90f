"""Planted defect: the writer gathers a shard's samples and writes the shard once it is full, so the
samples of the last, partial shard are never written."""

import tarfile
from pathlib import Path

from loaderlab.images import list_samples
from solutions.ex08_shards import LABEL_SUFFIX, SHARD_NAME, add_member
from solutions.ex08_shards import ShardDataset, ShardSample, shuffle_buffer  # noqa: F401


def write_shards(root, out_dir, target_shard_mb):
    root, out_dir = Path(root), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths, pending, pending_bytes = [], [], 0
    for sample in list_samples(root):
        key = sample.path.relative_to(root).with_suffix("").as_posix()
        pending += [(key + sample.path.suffix, sample.path.read_bytes()), (key + LABEL_SUFFIX, str(sample.label).encode())]
        pending_bytes += len(pending[-2][1])
        if pending_bytes >= target_shard_mb * 1_000_000:
            paths.append(out_dir / SHARD_NAME.format(len(paths)))
            with tarfile.open(paths[-1], "w") as tar:
                for name, data in pending:
                    add_member(tar, name, data)
            pending, pending_bytes = [], 0
    return paths  # planted: what is still pending is dropped
