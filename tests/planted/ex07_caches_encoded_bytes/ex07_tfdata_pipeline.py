"""Planted defect: the cache holds the files' bytes, before the decode, so every epoch decodes every image again."""

import tensorflow as tf

from loaderlab.images import class_names
from loaderlab.tfdata import decode_center_crop, folder_label, image_paths
from solutions.ex07_tfdata_pipeline import *  # noqa: F403
from solutions.ex07_tfdata_pipeline import AUTOTUNE, with_random_flips


def build_pipeline(root, batch_size, training, seed, drop_remainder=False):
    paths = image_paths(root)
    classes = tf.constant(class_names(root))
    dataset = tf.data.Dataset.from_tensor_slices(paths).map(lambda path: (tf.io.read_file(path), folder_label(path, classes)))
    dataset = dataset.cache()  # planted: bytes cached, the decode below runs every epoch
    dataset = dataset.map(lambda data, label: (decode_center_crop(data), label), num_parallel_calls=AUTOTUNE)
    if training:
        dataset = dataset.shuffle(len(paths), seed=seed, reshuffle_each_iteration=True)
        dataset = with_random_flips(dataset, seed)
    return dataset.batch(batch_size, drop_remainder=drop_remainder).prefetch(AUTOTUNE)
