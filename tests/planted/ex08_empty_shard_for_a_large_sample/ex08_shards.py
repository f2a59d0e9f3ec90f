"""Planted defect: the writer starts a new shard before adding a sample that would overflow the open one, even when
the open one is still empty, so with a target smaller than a sample the first shard is left empty."""

import tarfile
from pathlib import Path

from loaderlab.images import list_samples
from solutions.ex08_shards import LABEL_SUFFIX, SHARD_NAME, _add_member
from solutions.ex08_shards import ShardDataset, ShardSample, shuffle_buffer  # noqa: F401


def write_shards(root, out_dir, target_shard_mb):
    root, out_dir = Path(root), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = target_shard_mb * 1_000_000
    paths = [out_dir / SHARD_NAME.format(0)]
    tar = tarfile.open(paths[-1], "w", format=tarfile.PAX_FORMAT)
    for sample in list_samples(root):
        data = sample.path.read_bytes()
        if tar.offset + len(data) > target:  # planted: also when the open shard holds nothing yet
            tar.close()
            paths.append(out_dir / SHARD_NAME.format(len(paths)))
            tar = tarfile.open(paths[-1], "w", format=tarfile.PAX_FORMAT)
        key = sample.path.relative_to(root).with_suffix("").as_posix()
        _add_member(tar, key + sample.path.suffix.lower(), data)
        _add_member(tar, key + LABEL_SUFFIX, str(sample.label).encode())
    tar.close()
    return paths
