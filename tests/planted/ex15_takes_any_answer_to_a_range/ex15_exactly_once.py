"""Planted defect: the answer to a Range request is taken as the bytes asked for, whatever its status: a server that
ignores Range answers 200 with the whole object, and that is returned as the range."""

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


class Transfer(_honest.Transfer):
    def check_answer(self, answer, start, ranged):
        if not ranged:  # planted: neither the status nor the Content-Range of a ranged answer is looked at
            self.last = answer["ContentLength"] - 1


_honest.Transfer = Transfer
