"""Planted defect: a reader that gives up on a piece after its retries logs it and goes on ("one bad shard must not
stop training"): the epoch ends short, with no error for the loop to see."""

import logging

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


class RemoteEpochs(_honest.RemoteEpochs):
    def read_piece(self, piece):
        try:
            return super().read_piece(piece)
        except _honest.StoreError as err:   # planted: the piece's samples are skipped
            logging.getLogger(__name__).warning("skipping %d samples: %s", len(piece), err)
            return []
