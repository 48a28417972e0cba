"""The API throttle (apps/common/throttling.py): a per-user count per window, the same small cost at every request."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.http import HttpRequest
from rest_framework.test import APIClient

from apps.accounts.services import create_api_token
from apps.common.throttling import UserWindowRateThrottle

HOUR = 3600.0


class _Clocked(UserWindowRateThrottle):
    """The throttle at a given time (`clock[0]`, epoch seconds) and rate."""

    rate = "3/hour"
    clock = [0.0]

    def timer(self) -> float:
        return self.clock[0]


def _request(user: User) -> HttpRequest:
    request = HttpRequest()
    request.user = user
    return request


class _Busy(_Clocked):
    rate = "100000/hour"  # the default GPUFINOPS_API_RATE


def _allowed(user: User, at: float, kind: type[_Clocked] = _Clocked) -> tuple[bool, float]:
    _Clocked.clock[0] = at
    throttle = kind()
    return throttle.allow_request(_request(user), view=None), throttle.wait()


@pytest.mark.django_db
def test_a_user_gets_the_rate_per_clock_window_and_is_told_when_the_window_ends():
    alice = User.objects.create_user("alice")
    bob = User.objects.create_user("bob")
    start = 1_000 * HOUR  # a window's first second
    assert [_allowed(alice, start + 10 * i)[0] for i in range(3)] == [True, True, True]
    refused, wait = _allowed(alice, start + 600)
    assert not refused and wait == pytest.approx(HOUR - 600)
    assert _allowed(bob, start + 600)[0]  # counted per user
    assert _allowed(alice, start + HOUR)[0]  # the next window


@pytest.mark.django_db
def test_what_the_throttle_keeps_stays_one_number_however_many_requests():
    # DRF's UserRateThrottle kept every request's timestamp and read and wrote the whole list each time.
    alice = User.objects.create_user("alice")
    start = 2_000 * HOUR
    assert all(_allowed(alice, start + i, _Busy)[0] for i in range(500))
    throttle = _Busy()
    assert cache.get(f"{throttle.get_cache_key(_request(alice), None)}_2000") == 500


@pytest.mark.django_db
def test_the_api_answers_429_with_retry_after_past_the_rate(monkeypatch):
    monkeypatch.setattr(UserWindowRateThrottle, "rate", "2/hour", raising=False)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {create_api_token(User.objects.create_user('carol'), 1)}")
    statuses = [client.get("/api/v1/teams/").status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    refused = client.get("/api/v1/teams/")
    assert 0 < int(refused["Retry-After"]) <= HOUR
    assert refused.json()["errors"] == {}
