"""Planted defect: a vectorised flip after batch with one draw per batch, so a whole batch is flipped or not together."""

import tensorflow as tf

from solutions.ex07_tfdata_pipeline import *  # noqa: F403
from solutions.ex07_tfdata_pipeline import AUTOTUNE, decoded_files


def flip_batch(images, labels, seed):
    flip = tf.random.stateless_uniform([], seed) < 0.5  # planted: one draw for the whole batch
    return tf.cond(flip, lambda: tf.reverse(images, axis=[2]), lambda: images), labels


def build_pipeline(root, batch_size, training, seed, drop_remainder=False):
    dataset, file_count = decoded_files(root)
    dataset = dataset.cache()
    if training:
        dataset = dataset.shuffle(file_count, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    if training:
        draws = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
        dataset = tf.data.Dataset.zip(dataset, draws).map(lambda batch, draw: flip_batch(*batch, draw),
                                                          num_parallel_calls=AUTOTUNE)
    return dataset.prefetch(AUTOTUNE)
