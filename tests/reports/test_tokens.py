"""Unsubscribe tokens: the same subscription always gets the same token (the archive re-renders a sent e-mail byte
for byte, even a second later); links sent with the older timestamped form still work; nothing else reads."""

from __future__ import annotations

import time_machine
from django.core import signing

from apps.reports import tokens


def test_a_token_is_the_same_whenever_it_is_made():
    with time_machine.travel("2026-11-23 00:00:00Z", tick=False):
        first = tokens.make_token(42)
    with time_machine.travel("2026-11-23 00:00:01Z", tick=False):
        assert tokens.make_token(42) == first
    assert tokens.read_token(first) == 42
    assert tokens.make_token(43) != first


def test_a_timestamped_token_sent_before_still_reads():
    assert tokens.read_token(signing.dumps({"s": 7}, salt=tokens.SALT, compress=False)) == 7


def test_a_forged_or_broken_token_reads_as_nothing():
    good = tokens.make_token(7)
    other_salt = signing.Signer(salt="another").sign_object({"s": 7})
    for token in (good[:-2] + "xx", other_salt, "a:b:c", "garbage", "", good + ":", ":" + good):
        assert tokens.read_token(token) is None, token
