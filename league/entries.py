"""The league's roster: who runs, on what setup, and how each entry builds its loader.

Every entry does the same work on the same images: read, decode, 256-short-side resize + 224 centre crop, batches
of 64 (uint8 (N, 3, 224, 224) images and their labels). `build` names a function of this module (or another) that
returns a fresh iterable of batches for a `Setup`; `league.table` gates, times and ranks them.
"""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from loaderlab.images import CROP, RESIZE, Sample, draft_center_crop, list_samples, short_side_size
from loaderlab.machine import usable_cores
from loaderlab.paths import REPO_ROOT
from loaderlab.raydata.job import CLUSTER_CPUS
from loaderlab.tar_shards import sample_key

BATCH = 64
SERVICE_WORKERS = 2   # the tf.data service entry's workers
# A sandboxed entry's process finds a folder of its own here, made and removed by the league (`league.table`) around
# the sandbox: what its servers write (Ray's session files and HOME) is gone once the sandbox has ended.
CHILD_FOLDER_VARIABLE = "LOADERLAB_LEAGUE_CHILD_FOLDER"
PEERS_FILE = REPO_ROOT / "requirements-peers.txt"  # what `make league-peers` installs
PEERS_COMMAND = "make league-peers"


def peer_pin(project: str) -> str:
    """The pin of an optional peer in requirements-peers.txt ("name==version"), as `make league-peers` installs it."""
    for line in PEERS_FILE.read_text().splitlines():
        if line.split("==")[0].strip() == project:
            return line.strip()
    raise LookupError(f"{PEERS_FILE.name} pins no {project}")


DALI_PIN = peer_pin("nvidia-dali-cuda120")
TORCHCODEC_PIN = peer_pin("torchcodec")
SPDL_PINS = f'{peer_pin("spdl-io")} {peer_pin("spdl-core")}'


@dataclass(frozen=True)
class Setup:
    """What every entry gets: the image tree, the same images as module 06's tar shards, the batch size."""

    root: Path
    shards: Path
    batch_size: int = BATCH


@dataclass(frozen=True)
class Entry:
    """One row of the league: `build(setup)` returns a fresh iterable of (images, labels[, keys]) batches.

    Batches with keys (sample paths under the root, without suffix) may come in any order; without
    keys they must come in `list_samples` order. `requires` names the modules whose absence means
    "not installed", `install` the command that adds them.
    """

    name: str
    title: str
    build: str               # "module:function", imported in the entry's own process
    requires: tuple[str, ...] = ("torch",)
    install: str = "pip install -r requirements.txt"
    batch_size: int = BATCH  # what the configuration itself asks for
    learner: bool = False    # the learner's exercise: a stub reads "not started"
    reads_shards: bool = False  # reads the league's images as module 06's tar shards (written once per league)
    sandboxed: bool = False  # its process runs in the course's sandbox (the servers it starts bind every interface),
                             # with a folder of its own (CHILD_FOLDER_VARIABLE)
    note: str = ""


# ---- the entries -----------------------------------------------------------------------------------

def tutorial(setup: Setup) -> Iterable[Any]:
    """torchvision's ImageFolder + Resize(256), CenterCrop(224), ToTensor(); batch 64, no worker process."""
    from loaderlab.baselines import tutorial_dataloader

    return tutorial_dataloader(setup.root, setup.batch_size)


def seeds_tuned(setup: Setup) -> Iterable[Any]:
    """The seed articles' "tuned" DataLoader: the tutorial's dataset, batch 128, 8 workers, prefetch 4, persistent."""
    from loaderlab.baselines import tutorial_dataloader

    return tutorial_dataloader(setup.root, batch_size=128, num_workers=8, prefetch_factor=4, persistent_workers=True)


def ex04_solution(setup: Setup) -> Iterable[Any]:
    """Exercise 04's solution: draft-mode decode + one-call crop-resize, uint8, a worker per core."""
    from solutions.ex04_fast_dataloader import make_loader

    return make_loader(setup.root, setup.batch_size)


def ex04_yours(setup: Setup) -> Iterable[Any]:
    """Your exercise 04."""
    from exercises.ex04_fast_dataloader import make_loader

    return make_loader(setup.root, setup.batch_size)


def ex07_solution(setup: Setup) -> Iterable[Any]:
    """Exercise 07's solution in eval mode: parallel decode (AUTOTUNE), cache, batch, prefetch."""
    from solutions.ex07_tfdata_pipeline import build_pipeline

    return build_pipeline(setup.root, setup.batch_size, training=False, seed=0)


def ex07_yours(setup: Setup) -> Iterable[Any]:
    """Your exercise 07, in eval mode."""
    from exercises.ex07_tfdata_pipeline import build_pipeline

    return build_pipeline(setup.root, setup.batch_size, training=False, seed=0)


class _KeyedSamples:
    """The setup's images as a disaggregated entry hands them to its workers: paths, labels, keys and the batch size."""

    def __init__(self, setup: Setup) -> None:
        samples = list_samples(setup.root)
        self.paths, self.labels = [str(s.path) for s in samples], [s.label for s in samples]
        self.keys, self.batch_size = [sample_key(s) for s in samples], setup.batch_size


class _ServedEpochs(_KeyedSamples):
    """Each iteration a new tf.data service job over the setup's images: (uint8 NHWC crops, labels, keys) batches."""

    def __iter__(self) -> Iterator[tuple[Any, Any, list[str]]]:
        from loaderlab.dataservice.pipeline import served_epoch
        from loaderlab.dataservice.servers import SERVICE

        for keys, labels, images in served_epoch(self.paths, self.labels, self.keys, self.batch_size,
                                                 service=SERVICE):
            yield images, labels, [key.decode() for key in keys.numpy()]


def tfdata_service(setup: Setup) -> Iterable[Any]:
    """tf.data service: a dispatcher and SERVICE_WORKERS workers (`loaderlab.dataservice.servers.start_cluster`),
    started once in this process's sandbox, read, decode and crop (DYNAMIC sharding, in any order, with keys); this
    process, the trainer, only receives the batches. The workers stand for other machines: the host's CPU the league
    counts leaves them out (`league.table.host_cpu_seconds`)."""
    _service_cluster()
    return _ServedEpochs(setup)


@functools.cache
def _service_cluster() -> list[Any]:
    import tempfile

    from loaderlab.dataservice.servers import start_cluster

    logs = Path(tempfile.mkdtemp(prefix="loaderlab-league-service-"))
    return start_cluster(logs, SERVICE_WORKERS)


class _RayEpochs(_KeyedSamples):
    """Each iteration a new Ray Data epoch over the setup's images: (uint8 NHWC crops, labels, keys) batches."""

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray, list[str]]]:
        import ray

        blocks = -(-len(self.paths) // self.batch_size)
        dataset = ray.data.range(len(self.paths), override_num_blocks=blocks).map_batches(
            ray_crops, batch_size=self.batch_size, fn_kwargs={"paths": self.paths, "labels": self.labels})
        for batch in dataset.iter_batches(batch_size=self.batch_size, batch_format="numpy"):
            yield batch["image"], batch["label"], [self.keys[i] for i in batch["id"]]


def ray_crops(batch: dict[str, np.ndarray], *, paths: list[str], labels: list[int]) -> dict[str, np.ndarray]:
    """The Ray Data entry's map task, in a Ray worker: the crops (`draft_center_crop`, as the thread-batch entries
    make them) and labels of one block's sample numbers (`batch["id"]`)."""
    ids = batch["id"]
    return {"id": ids, "label": np.array([labels[i] for i in ids], dtype=np.int64),
            "image": np.stack([draft_center_crop(paths[i]) for i in ids])}


def ray_data(setup: Setup) -> Iterable[Any]:
    """Ray Data: a local Ray cluster (`loaderlab.raydata.driver.start_local_cluster`: loopback only, no dashboard,
    `loaderlab.raydata.job.CLUSTER_CPUS` task slots), started once in this process's sandbox, its files in the
    league's folder for this process; each epoch `ray.data.range` over the samples in blocks of a batch,
    `map_batches(ray_crops)` reading, decoding and cropping in Ray's task workers, `iter_batches` here (in any order,
    with keys). The task workers stand for other machines: the host's CPU the league counts leaves them out, with
    Ray's own processes (`league.table.host_cpu_seconds`). On a real cluster the trainer's node still runs a raylet
    and an object store of its own; the league counts this process, the driver, alone."""
    _ray_cluster()
    return _RayEpochs(setup)


@functools.cache
def _ray_cluster() -> None:
    from loaderlab.raydata.driver import start_local_cluster

    folder = os.environ.get(CHILD_FOLDER_VARIABLE)
    if not folder:
        raise RuntimeError(f"ray-data starts Ray only in the league's sandboxed child, which names its folder in "
                           f"{CHILD_FOLDER_VARIABLE} (league.table.sandboxed_child_result)")
    start_local_cluster(Path(folder) / "ray", Path(folder) / "home")


def seeds_tfdata(setup: Setup) -> Iterable[Any]:
    """tf.data as the seed articles wrote it: read, decode_jpeg, resize straight to 224 x 224 (no crop), AUTOTUNE."""
    import tensorflow as tf

    samples = list_samples(setup.root)

    def load(path: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        return tf.cast(tf.image.resize(image, (CROP, CROP)), tf.uint8), label

    files = tf.data.Dataset.from_tensor_slices(([str(s.path) for s in samples], [s.label for s in samples]))
    return files.map(load, num_parallel_calls=tf.data.AUTOTUNE).batch(setup.batch_size).prefetch(tf.data.AUTOTUNE)


def _shard_loader(dataset_class: type, setup: Setup) -> Iterable[Any]:
    from torch.utils.data import DataLoader

    dataset = dataset_class(setup.shards, shuffle=False, decode=_BytesCrop(_shard_crop()))
    return _KeyedBatches(DataLoader(dataset, batch_size=setup.batch_size, num_workers=usable_cores()))


def _shard_crop() -> Callable[[Any], np.ndarray]:
    """How both ex08 entries decode a shard's bytes: the course's draft-mode crop (exercise 01's work), so the two
    differ only in how they read the shards, with or without solutions/."""
    return draft_center_crop


def ex08_solution(setup: Setup) -> Iterable[Any]:
    """Exercise 08's ShardDataset over the tar shards, decoded with exercise 01's crop, in a DataLoader (a worker per core)."""
    from solutions.ex08_shards import ShardDataset

    return _shard_loader(ShardDataset, setup)


def ex08_yours(setup: Setup) -> Iterable[Any]:
    """Your exercise 08's ShardDataset over the same shards (written by webdataset's TarWriter in module 06's layout)."""
    from exercises.ex08_shards import ShardDataset

    return _shard_loader(ShardDataset, setup)


def webdataset_library(setup: Setup) -> Iterable[Any]:
    """The `webdataset` library over the same shards, as its README writes it: decode("pil"), torchvision's
    Resize(256) + CenterCrop(224) + PILToTensor (uint8), batched, in a WebLoader with a worker per core."""
    import webdataset as wds
    from torchvision import transforms

    transform = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(CROP), transforms.PILToTensor()])
    urls = [str(p) for p in sorted(setup.shards.glob("shard-*.tar"))]
    dataset = (wds.WebDataset(urls, shardshuffle=False).decode("pil").to_tuple("jpg;jpeg;png", "cls", "__key__")
               .map_tuple(transform, int, str).batched(setup.batch_size, partial=True))
    return wds.WebLoader(dataset, batch_size=None, num_workers=min(usable_cores(), len(urls)))


def dali_cpu(setup: Setup) -> Iterable[Any]:
    """NVIDIA DALI's CPU pipeline, as its docs write it: file reader, decoders.image (cpu), resize_shorter=256
    (linear, antialiased), crop_mirror_normalize to a uint8 CHW 224 crop; a thread per core, no GPU. DALI 2's decoders
    turn a file upright by its EXIF orientation unless told not to (`adjust_orientation`, True by default in DALI
    2.2's documentation): the league's work keeps the pixels as stored (loaderlab.images), so it is turned off."""
    from nvidia.dali import fn, pipeline_def, types

    samples = list_samples(setup.root)

    @pipeline_def(batch_size=setup.batch_size, num_threads=usable_cores(), device_id=None, prefetch_queue_depth=2)
    def pipeline():  # type: ignore[no-untyped-def]
        data, labels = fn.readers.file(files=[str(s.path) for s in samples], labels=[s.label for s in samples],
                                       random_shuffle=False, pad_last_batch=True, name="reader")
        images = fn.decoders.image(data, device="cpu", output_type=types.RGB, adjust_orientation=False)
        images = fn.resize(images, resize_shorter=256, interp_type=types.INTERP_LINEAR, antialias=True)
        return fn.crop_mirror_normalize(images, crop=(CROP, CROP), dtype=types.UINT8, output_layout="CHW"), labels

    return _DaliEpoch(pipeline, len(samples), setup.batch_size)


class _DaliEpoch:
    """One epoch of a DALI pipeline as numpy batches (the padded last batch cut to the samples left)."""

    def __init__(self, make_pipeline: Callable[[], Any], samples: int, batch_size: int) -> None:
        self.make_pipeline, self.samples, self.batch_size = make_pipeline, samples, batch_size

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        pipe = self.make_pipeline()
        pipe.build()
        for start in range(0, self.samples, self.batch_size):
            images, labels = pipe.run()
            keep = min(self.batch_size, self.samples - start)
            yield np.array(images.as_tensor())[:keep], np.array(labels.as_tensor()).reshape(-1)[:keep]


def dali_roi(setup: Setup) -> Iterable[Any]:
    """NVIDIA DALI's ROI decoder on the CPU, as its docs write it: the file reader, fn.peek_image_shape (each image's
    size, from its header), fn.decoders.image_crop (cpu) decoding only the centre window that the 256 resize + 224
    crop keeps (a square of 224/256 of the short side), fn.resize of that window to 224 x 224 (linear, antialiased),
    fn.transpose to CHW; a thread per core, no GPU; EXIF orientation not applied, as in `dali_cpu`."""
    from nvidia.dali import fn, math as dali_math, pipeline_def, types

    samples = list_samples(setup.root)

    @pipeline_def(batch_size=setup.batch_size, num_threads=usable_cores(), device_id=None, prefetch_queue_depth=2)
    def pipeline():  # type: ignore[no-untyped-def]
        data, labels = fn.readers.file(files=[str(s.path) for s in samples], labels=[s.label for s in samples],
                                       random_shuffle=False, pad_last_batch=True, name="reader")
        shape = fn.peek_image_shape(data, adjust_orientation=False)  # (H, W, C) as stored
        side = fn.cast(dali_math.min(shape[0], shape[1]), dtype=types.FLOAT) * (CROP / RESIZE)
        images = fn.decoders.image_crop(data, device="cpu", output_type=types.RGB, crop_w=side, crop_h=side,
                                        adjust_orientation=False)
        images = fn.resize(images, resize_x=CROP, resize_y=CROP, interp_type=types.INTERP_LINEAR, antialias=True)
        return fn.transpose(images, perm=[2, 0, 1]), labels

    return _DaliEpoch(pipeline, len(samples), setup.batch_size)


def _thread_crops(setup: Setup, crop: Callable[[Path], Any], stack: Callable[[list[Any]], Any]) -> Iterable[Any]:
    """Batches of `crop(path)` made by a thread per usable core (a pool per pass), stacked by `stack`, in
    `list_samples` order, with their labels."""
    samples = list_samples(setup.root)

    def batches() -> Iterator[tuple[Any, np.ndarray]]:
        with ThreadPoolExecutor(usable_cores()) as pool:
            for start in range(0, len(samples), setup.batch_size):
                chunk = samples[start : start + setup.batch_size]
                yield stack(list(pool.map(crop, [s.path for s in chunk]))), np.array([s.label for s in chunk])

    return Reiterable(batches)


def _centre_crop(image: np.ndarray, width: int, height: int) -> np.ndarray:
    """The centre CROP x CROP of an (H, W, 3) image resized to (width, height), as CHW (torchvision's CenterCrop offsets)."""
    left, top = round((width - CROP) / 2), round((height - CROP) / 2)
    return image[top : top + CROP, left : left + CROP].transpose(2, 0, 1)


def opencv_threads(setup: Setup) -> Iterable[Any]:
    """OpenCV as practitioners write it: cv2.imdecode of the file's bytes (IMREAD_COLOR_RGB, IMREAD_IGNORE_ORIENTATION),
    cv2.resize of the short side to 256 with INTER_AREA (OpenCV's advice for shrinking), the centre 224 crop; a thread
    per usable core (cv2 releases the GIL), cv2.setNumThreads(1) so OpenCV's own pool does not fight the threads."""
    import cv2

    return _opencv_crops(setup, cv2.IMREAD_COLOR_RGB | cv2.IMREAD_IGNORE_ORIENTATION)


def _opencv_crops(setup: Setup, flags: int) -> Iterable[Any]:
    """`opencv_threads` with cv2.imdecode's `flags`."""
    import cv2

    cv2.setNumThreads(1)

    def crop(path: Path) -> np.ndarray:
        image = cv2.imdecode(np.fromfile(path, dtype=np.uint8), flags)
        if image is None:
            raise ValueError(f"{path}: cv2.imdecode could not decode it")
        width, height = short_side_size(image.shape[1], image.shape[0])
        return _centre_crop(cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA), width, height)

    return _thread_crops(setup, crop, np.stack)


def opencv_reduced(setup: Setup) -> Iterable[Any]:
    """OpenCV decoding less: cv2.imdecode with IMREAD_REDUCED_COLOR_2 or _4 (libjpeg's DCT scaling to 1/2 or 1/4), the
    largest reduction that keeps the short side >= 256 (so the 224 window keeps >= 224 pixels), chosen from the JPEG's
    size in its header (Pillow's lazy open, which decodes no pixels); then BGR to RGB, INTER_AREA to the 256 short side,
    the centre crop; a thread per usable core, cv2.setNumThreads(1)."""
    import cv2
    from PIL import Image

    cv2.setNumThreads(1)
    reductions = {4: cv2.IMREAD_REDUCED_COLOR_4, 2: cv2.IMREAD_REDUCED_COLOR_2}  # both decode to BGR

    def crop(path: Path) -> np.ndarray:
        data = np.fromfile(path, dtype=np.uint8)
        with Image.open(io.BytesIO(data)) as header:
            size, is_jpeg = header.size, header.format == "JPEG"
        factor = next((f for f in reductions if is_jpeg and min(size) // f >= RESIZE), 1)
        if factor == 1:
            image = cv2.imdecode(data, cv2.IMREAD_COLOR_RGB | cv2.IMREAD_IGNORE_ORIENTATION)
        else:
            image = cv2.imdecode(data, reductions[factor] | cv2.IMREAD_IGNORE_ORIENTATION)
            image = None if image is None else cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        if image is None:
            raise ValueError(f"{path}: cv2.imdecode could not decode it")
        width, height = short_side_size(*size)
        return _centre_crop(cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA), width, height)

    return _thread_crops(setup, crop, np.stack)


def torchcodec_threads(setup: Setup) -> Iterable[Any]:
    """torchcodec's CPU image decoder (torchvision 0.29's decode_jpeg is deprecated in its favour), as its docs write it:
    decode_image(path, mode="RGB") to a uint8 CHW tensor, then torchvision's v2 Resize(256) + CenterCrop(224) on the
    tensor (bilinear, antialiased); a thread per usable core, torch.set_num_threads(1) so torch's intra-op pool does
    not fight the threads."""
    import torch
    from torchcodec.decoders import decode_image
    from torchvision.transforms import v2

    torch.set_num_threads(1)
    transform = v2.Compose([v2.Resize(RESIZE, antialias=True), v2.CenterCrop(CROP)])

    def crop(path: Path) -> Any:
        return transform(decode_image(path, mode="RGB"))

    return _thread_crops(setup, crop, torch.stack)


def spdl_loader(setup: Setup) -> Iterable[Any]:
    """SPDL (Meta's thread-based loader), as its DataLoader docs write it: a preprocessor stage per image on the
    pipeline's threads (spdl.io.demux_image + decode_packets with FFmpeg's filter from get_video_filter_desc: the short
    side scaled to 256 (bilinear, scale_mode="crop"), the centre 224 crop, rgb24), batches of 64, an aggregator that
    merges a batch with convert_frames; num_threads = usable cores. Batches come in order of completion, with keys."""
    import spdl.io
    import spdl.io.utils
    from spdl.dataloader import DataLoader

    try:
        spdl.io.utils.get_ffmpeg_versions()
    except RuntimeError as err:
        raise RuntimeError("spdl.io needs FFmpeg's shared libraries (libavutil 56 to 61: FFmpeg 4 to 8), which this "
                           "machine lacks: install FFmpeg's libraries (e.g. apt-get install ffmpeg)") from err
    filter_desc = spdl.io.get_video_filter_desc(scale_width=RESIZE, scale_height=RESIZE, scale_algo="bilinear",
                                                scale_mode="crop", crop_width=CROP, crop_height=CROP, pix_fmt="rgb24")

    def decode(sample: Sample) -> tuple[Any, Sample]:
        return spdl.io.decode_packets(spdl.io.demux_image(str(sample.path)), filter_desc=filter_desc), sample

    def batchify(items: list[tuple[Any, Sample]]) -> tuple[np.ndarray, np.ndarray, list[str]]:
        images = spdl.io.to_numpy(spdl.io.convert_frames([frames for frames, _ in items]))
        return images, np.array([s.label for _, s in items]), [sample_key(s) for _, s in items]

    return DataLoader(list_samples(setup.root), preprocessor=decode, batch_size=setup.batch_size, aggregator=batchify,
                      num_threads=usable_cores(), timeout=60)


def thread_batches(setup: Setup, num_workers: int, crop: Callable[[Path], np.ndarray] = draft_center_crop) -> Iterable[Any]:
    from torch.utils.data import DataLoader

    return DataLoader(_ThreadBatchDataset(setup.root, crop), batch_size=setup.batch_size, num_workers=num_workers,
                      collate_fn=_already_a_batch, persistent_workers=num_workers > 0)


def thread_batches_main(setup: Setup) -> Iterable[Any]:
    """A candidate: `__getitems__` decodes a whole batch on a thread per core (Pillow releases the GIL) into one
    preallocated uint8 batch; no worker process."""
    return thread_batches(setup, 0)


def thread_batches_one_worker(setup: Setup) -> Iterable[Any]:
    """The same batch-of-threads dataset in one worker process, so the next batch decodes while this one is used."""
    return thread_batches(setup, 1)


def ex01_decode_less_threads(setup: Setup) -> Iterable[Any]:
    """Exercise 01's step 5 solution (`decode_less_crop`) in the batch-of-threads dataset: a thread per core, no worker
    process."""
    from solutions.ex01_profile_and_fix import decode_less_crop

    return thread_batches(setup, 0, decode_less_crop)


def ex01_yours_threads(setup: Setup) -> Iterable[Any]:
    """Your exercise 01 step 5 crop in the same batch-of-threads dataset."""
    from exercises.ex01_profile_and_fix import decode_less_crop

    return thread_batches(setup, 0, decode_less_crop)


class _ThreadBatchDataset:
    """Map-style dataset whose `__getitems__` makes a whole (uint8 (N, 3, 224, 224), int64 (N,)) batch with threads,
    each image made by `crop(path)` (uint8 HWC)."""

    def __init__(self, root: Path, crop: Callable[[Path], np.ndarray]) -> None:
        self.samples = list_samples(root)
        self.crop = crop
        self.pool: ThreadPoolExecutor | None = None
        self.pid = -1

    def __len__(self) -> int:
        return len(self.samples)

    def __getitems__(self, indices: list[int]) -> tuple[Any, Any]:
        import torch

        if self.pool is None or self.pid != os.getpid():  # a pool per process (a worker gets a copy without threads)
            self.pool, self.pid = ThreadPoolExecutor(usable_cores()), os.getpid()
        batch = torch.empty((len(indices), 3, CROP, CROP), dtype=torch.uint8)
        pixels = batch.numpy()  # the same memory: filled in place by the threads

        def fill(row: int) -> None:
            pixels[row] = self.crop(self.samples[indices[row]].path).transpose(2, 0, 1)

        list(self.pool.map(fill, range(len(indices))))
        return batch, torch.tensor([self.samples[i].label for i in indices], dtype=torch.int64)

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__ | {"pool": None, "pid": -1}


def _already_a_batch(batch: Any) -> Any:
    return batch


def decode_only(setup: Setup) -> Iterable[Any]:
    """The ceiling: Pillow reads and fully decodes every file, nothing else, on a thread per usable core."""
    from PIL import Image

    def decode(path: Path) -> tuple[int, int]:
        with Image.open(path) as image:
            image.load()
            return image.size

    return _thread_crops(setup, decode, list)


def decode_less_only(setup: Setup) -> Iterable[Any]:
    """The second ceiling: libjpeg-turbo (simplejpeg) decodes the whole frame of every file at the smallest power-of-two
    DCT scale that leaves the crop window at least 224 px wide, with its smooth colour upsampling, nothing else, on a
    thread per usable core.

    A fast decode, not the least this work allows: cropping the window inside the decoder (TurboJPEG's cropping
    region, TensorFlow's decode_and_crop_jpeg) skips, in a baseline JPEG, the inverse DCT and colour conversion
    outside the window and every row below it (the rows above are still entropy-decoded; in a progressive JPEG all
    scans are, up front), and fast upsampling skips more; no library in the lock crops in the decoder on threads
    without its own pipeline around it. A PNG (under a .jpg name: data_gen.encodings) has no DCT to scale: Pillow
    decodes it whole."""
    import simplejpeg
    from PIL import Image

    from loaderlab.images import crop_window, file_kind

    def decode(path: Path) -> tuple[int, ...]:
        data = path.read_bytes()
        if file_kind(data) == "png-named-jpg":  # no DCT to scale: decoded whole
            with Image.open(io.BytesIO(data)) as image:
                image.load()
                return image.size
        height, width, _, _ = simplejpeg.decode_jpeg_header(data)
        left, _, right, _ = crop_window(width, height)
        scale = max(s for s in (1, 2, 4, 8) if s == 1 or (right - left) / s >= CROP)
        return simplejpeg.decode_jpeg(data, colorspace="RGB", min_height=-(-height // scale),
                                      min_width=-(-width // scale)).shape

    return _thread_crops(setup, decode, list)


def skips_the_crop(setup: Setup) -> Iterable[Any]:
    """A planted peer for the gate's own test: Pillow resizes straight to 224 x 224 (as the seeds' tf.data does)."""
    from PIL import Image

    samples = list_samples(setup.root)

    def batches() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for start in range(0, len(samples), setup.batch_size):
            chunk = samples[start : start + setup.batch_size]
            images = [np.asarray(Image.open(s.path).convert("RGB").resize((CROP, CROP), Image.BILINEAR)) for s in chunk]
            yield np.stack(images).transpose(0, 3, 1, 2), np.array([s.label for s in chunk])

    return Reiterable(batches)


def applies_exif_orientation(setup: Setup) -> Iterable[Any]:
    """A planted peer for the gate's own test: OpenCV with imdecode's default for colour (IMREAD_COLOR_RGB alone), which
    turns a file upright as its EXIF orientation tag says: a tagged file's crop shows other pixels than the reference's."""
    import cv2

    return _opencv_crops(setup, cv2.IMREAD_COLOR_RGB)


class Reiterable:
    """An iterable whose every pass is a fresh `make()` (a loader the league iterates once to gate it, again to time it)."""

    def __init__(self, make: Callable[[], Iterator[Any]]) -> None:
        self.make = make

    def __iter__(self) -> Iterator[Any]:
        return self.make()


class _KeyedBatches:
    """ShardSample batches (key, data, label) as (images, labels, keys)."""

    def __init__(self, loader: Iterable[Any]) -> None:
        self.loader = loader

    def __iter__(self) -> Iterator[tuple[Any, Any, list[str]]]:
        for batch in self.loader:
            yield batch.data, batch.label, list(batch.key)


class _BytesCrop:
    """Picklable decode(bytes) -> uint8 CHW tensor, for workers started by spawn too."""

    def __init__(self, crop: Callable[[Any], np.ndarray]) -> None:
        self.crop = crop

    def __call__(self, data: bytes) -> Any:
        import torch

        return torch.from_numpy(np.ascontiguousarray(self.crop(io.BytesIO(data)).transpose(2, 0, 1)))


# A learner's copy of the course (`make learner-copy`) has no solutions/: the entries built on them say so.
SOLUTIONS_NOTE = "the course's solutions/ (a learner's copy leaves them out)"
CEILING = Entry("decode-only", "decode only, full size (Pillow, a thread per core): the first ceiling",
                "league.entries:decode_only", requires=("PIL",))
WINDOW_CEILING = Entry("decode-less-only", "decode only, whole frame at the smallest power-of-two DCT scale keeping "
                       "224 px (simplejpeg, a thread per core): the second ceiling", "league.entries:decode_less_only",
                       requires=("simplejpeg",))
CEILINGS = (CEILING, WINDOW_CEILING)
ENTRIES = [
    Entry("tutorial", "tutorial: ImageFolder + ToTensor, batch 64, 0 workers", "league.entries:tutorial",
          note="float32 in [0, 1]: 4x the bytes"),
    Entry("seeds-tuned", "seeds' tuned: batch 128, 8 workers, prefetch 4, persistent", "league.entries:seeds_tuned",
          batch_size=128, note="float32 in [0, 1], batch 128"),
    Entry("ex04", "ex04 solution: DataLoader, uint8, a worker per core", "league.entries:ex04_solution",
          requires=("torch", "solutions"), install=SOLUTIONS_NOTE),
    Entry("ex07", "ex07 solution: tf.data, AUTOTUNE", "league.entries:ex07_solution",
          requires=("tensorflow", "solutions"), install=SOLUTIONS_NOTE),
    Entry("ex08", "ex08 solution: tar shards in a DataLoader", "league.entries:ex08_solution",
          requires=("torch", "solutions"), install=SOLUTIONS_NOTE, reads_shards=True),
    Entry("seeds-tfdata", "seeds' tf.data: resize to 224, AUTOTUNE", "league.entries:seeds_tfdata",
          requires=("tensorflow",)),
    Entry("webdataset", "webdataset library over the tar shards", "league.entries:webdataset_library",
          requires=("webdataset",), reads_shards=True),
    Entry("dali", "NVIDIA DALI, CPU pipeline", "league.entries:dali_cpu", requires=("nvidia.dali",),
          install=f"{PEERS_COMMAND} (pip install {DALI_PIN})"),
    Entry("ex01-threads", "ex01 step 5 solution, a batch decoded by threads, 0 workers",
          "league.entries:ex01_decode_less_threads", requires=("torch", "simplejpeg", "solutions"), install=SOLUTIONS_NOTE),
    Entry("dali-roi", "NVIDIA DALI, CPU ROI decode of the centre window", "league.entries:dali_roi",
          requires=("nvidia.dali",), install=f"{PEERS_COMMAND} (pip install {DALI_PIN})"),
    Entry("opencv", "OpenCV: imdecode + resize (INTER_AREA), a thread per core", "league.entries:opencv_threads",
          requires=("cv2",)),
    Entry("opencv-reduced", "OpenCV: DCT-reduced imdecode + resize (INTER_AREA), a thread per core",
          "league.entries:opencv_reduced", requires=("cv2", "PIL")),
    Entry("torchcodec", "torchcodec decode_image + torchvision v2 resize/crop, a thread per core",
          "league.entries:torchcodec_threads", requires=("torchcodec", "torchvision"),
          install=f"{PEERS_COMMAND} (pip install {TORCHCODEC_PIN})"),
    Entry("spdl", "SPDL DataLoader: FFmpeg decode + scale/crop filter, thread stages", "league.entries:spdl_loader",
          requires=("spdl.io", "spdl.dataloader"), install=f"{PEERS_COMMAND} (pip install {SPDL_PINS}; and FFmpeg 4 to 8)"),
    Entry("thread-batch", "candidate: a batch decoded by threads, 0 workers", "league.entries:thread_batches_main"),
    Entry("thread-batch-1w", "candidate: a batch decoded by threads, 1 worker",
          "league.entries:thread_batches_one_worker"),
    Entry("tfdata-service", f"tf.data service: {SERVICE_WORKERS} worker processes decode and crop, the trainer "
          "receives batches", "league.entries:tfdata_service", requires=("tensorflow",), sandboxed=True,
          note="its workers stand for other machines: their CPU is not the host's"),
    Entry("ray-data", f"Ray Data: map_batches on {CLUSTER_CPUS} task slots decodes and crops, the trainer receives "
          "batches",
          "league.entries:ray_data", requires=("ray",), sandboxed=True,
          note="its task workers stand for other machines: their CPU and Ray's own processes' is not the host's; "
               "on a real cluster the trainer's node still runs a raylet and object store, not counted here"),
    Entry("yours-ex01", "your ex01 step 5, a batch decoded by threads", "league.entries:ex01_yours_threads",
          requires=("torch", "simplejpeg"), learner=True),
    Entry("yours-ex04", "your ex04", "league.entries:ex04_yours", learner=True),
    Entry("yours-ex07", "your ex07", "league.entries:ex07_yours", requires=("tensorflow",), learner=True),
    Entry("yours-ex08", "your ex08", "league.entries:ex08_yours", learner=True, reads_shards=True),
]
PLANTED = Entry("planted-skips-crop", "planted: resizes straight to 224 (no crop)", "league.entries:skips_the_crop",
                requires=("PIL",))
PLANTED_EXIF = Entry("planted-exif-upright", "planted: OpenCV's default decode, EXIF orientation applied",
                     "league.entries:applies_exif_orientation", requires=("cv2",))
BY_NAME = {e.name: e for e in [*CEILINGS, *ENTRIES, PLANTED, PLANTED_EXIF]}
