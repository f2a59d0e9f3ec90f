"""Planted defect: a body cut short is thrown away and asked for again from its first byte (what boto3 users write
around get_object().read()): the bytes come out right, but the proxy sends the start of the object again."""

import solutions.ex15_exactly_once as _honest
from solutions.ex15_exactly_once import *  # noqa: F403


class Transfer(_honest.Transfer):
    def attempt(self):
        self.data = bytearray()  # planted: what arrived before the cut is dropped, the next attempt starts over
        super().attempt()


_honest.Transfer = Transfer  # read_object and read_objects look it up in the solution's module
