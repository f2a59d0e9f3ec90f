"""Planted defect: only 503 answers are retried; a connection that fails (refused, closed unanswered) raises at once."""

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403
from botocore.exceptions import BotoCoreError


class Transfer(_honest.Transfer):
    def attempt(self):
        try:
            super().attempt()
        except _honest.RetryableFailure as failure:
            if isinstance(failure.__cause__, BotoCoreError) and self.data == bytearray():  # planted: not retried
                raise _honest.StoreError(str(failure)) from failure.__cause__
            raise


_honest.Transfer = Transfer
