"""Planted defect: never passes num_workers on: the shards are read in the main process, between the decodes."""

from solutions.ex10_gpu_decode import GpuDecode


class MainProcess(GpuDecode):
    def raw_loader(self, shard_dir, batch_size, num_workers):
        return super().raw_loader(shard_dir, batch_size, 0)  # the defect


PLANTED = MainProcess()
read_batches, decode_batch, gpu_decode_loader = PLANTED.read_batches, PLANTED.decode_batch, PLANTED.gpu_decode_loader
