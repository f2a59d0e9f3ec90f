"""Planted defect: cuts full batches from the workers' chunks and forgets what is left at the end: the last, partial batch."""

from solutions.ex10_gpu_decode import GpuDecode


class DropsLast(GpuDecode):
    def read_batches(self, shard_dir, batch_size, num_workers):
        for batch in super().read_batches(shard_dir, batch_size, num_workers):
            if len(batch.keys) == batch_size:  # the defect: only full batches
                yield batch


PLANTED = DropsLast()
read_batches, decode_batch, gpu_decode_loader = PLANTED.read_batches, PLANTED.decode_batch, PLANTED.gpu_decode_loader
