"""Planted defect: shard_samples trusts tarfile's loop to end where the shard ends: a shard cut at a member's boundary
(or without its end-of-archive blocks) ends the loop quietly, and the epoch with it."""

import tarfile

import solutions.ex14_remote_shards as _honest
from solutions.ex14_remote_shards import *  # noqa: F403


def tar_samples(stream, size, decode, where):
    key, parts = None, {}
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                member_key, _, suffix = member.name.rpartition(".")
                if key is not None and member_key != key:
                    yield _whole(key, parts, decode, where)
                    parts = {}
                key = member_key
                parts[suffix] = tar.extractfile(member).read()
    except RemoteReadError:
        raise
    except Exception as err:
        raise RemoteReadError(f"shard {where} is cut short or not a tar ({err})") from err
    # planted: where the stream ended is never compared with the end-of-archive blocks
    if key is not None:
        yield _whole(key, parts, decode, where)


def _whole(key, parts, decode, where):
    if set(parts) != {"jpg", "cls"}:
        raise RemoteReadError(f"shard {where}: sample {key!r} has members {sorted(parts)}: cut short or malformed")
    return RemoteSample(key, parts["jpg"] if decode is None else decode(parts["jpg"]), int(parts["cls"]))


_honest.tar_samples = tar_samples  # shard_samples looks it up in its own module
