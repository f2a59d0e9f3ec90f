"""Planted defect: leaves out a sample that does not decode and goes on: a silent, shrinking dataset."""

from loaderlab.images import CorruptImage
from solutions.ex10_gpu_decode import GpuDecode, RawBatch


class SkipsBadSamples(GpuDecode):
    def device_batch(self, batch, device):
        try:
            return super().device_batch(batch, device)
        except CorruptImage as err:  # the defect: a bad file is left out, and the loader goes on
            keep = [i for i, key in enumerate(batch.keys) if key != err.path.as_posix()]
            return super().device_batch(RawBatch([batch.jpegs[i] for i in keep], batch.labels[keep],
                                                  [batch.keys[i] for i in keep]), device)


PLANTED = SkipsBadSamples()
read_batches, decode_batch, gpu_decode_loader = PLANTED.read_batches, PLANTED.decode_batch, PLANTED.gpu_decode_loader
