"""No endpoint grows a query per row (N+1): each answers in a fixed, small number of queries."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from apps.inventory.models import Team

# path -> the most queries it may take (authentication, visibility and the answer itself included)
BUDGET = {
    "/api/v1/usage/?start=2026-11-23&end=2026-11-24&group_by=team,namespace": 8,
    "/api/v1/usage/?start=2026-11-23&end=2026-11-24&group_by=pod": 8,
    "/api/v1/usage/?start=2026-11-23&end=2026-11-24&group_by=workload,cluster": 9,
    "/api/v1/rankings/?start=2026-11-23&end=2026-11-25&limit=2": 7,
    "/api/v1/rankings/?start=2026-11-23&end=2026-11-25&limit=2&offset=100&by=pod": 8,
    "/api/v1/idle-allocations/": 14,
    "/api/v1/teams/": 6,
    "/api/v1/clusters/": 7,
    "/api/v1/clusters/alpha/": 8,
    "/api/v1/fragmentation/": 8,
    "/api/v1/queues/": 8,
    "/api/v1/pending/": 9,
    "/api/v1/data-status/?start=2026-11-23&end=2026-11-25": 14,
}


@pytest.mark.parametrize("path", sorted(BUDGET))
@pytest.mark.parametrize("who", ["root", "alice"])
def test_each_endpoint_answers_in_a_bounded_number_of_queries(clients, django_assert_max_num_queries, path, who,
                                                               settings):
    settings.GPUFINOPS_API_CACHE_SECONDS = 0  # count the real work, not a cache hit
    with django_assert_max_num_queries(BUDGET[path]):
        response = clients[who].get(path)
    assert response.status_code == 200, response.content[:300]


def test_the_query_count_does_not_grow_with_the_number_of_clusters(clients, django_assert_max_num_queries,
                                                                    settings):
    from apps.inventory.models import Cluster
    from apps.inventory.services import record_teams

    settings.GPUFINOPS_API_CACHE_SECONDS = 0
    for i in range(20):
        record_teams(Cluster.objects.create(name=f"extra-{i}"), ["vision"], datetime.now(UTC))
    for path in ("/api/v1/clusters/", "/api/v1/usage/?start=2026-11-23&end=2026-11-24&group_by=cluster",
                 "/api/v1/fragmentation/", "/api/v1/queues/", "/api/v1/pending/",
                 "/api/v1/data-status/?start=2026-11-23&end=2026-11-25"):
        with django_assert_max_num_queries(BUDGET.get(path, 9)):
            assert clients["alice"].get(path).status_code == 200


@pytest.mark.parametrize("who, teams", [("alice", {"vision"}), ("dave", set()), ("carol", None), ("root", None)])
def test_a_token_request_reads_authentication_and_visibility_in_one_query(
        clients, users, settings, django_assert_num_queries, django_assert_max_num_queries, who, teams):
    """The token, its user, the finance group and the user's teams come in one statement; the usage answer then
    takes its own queries only (the grouped rollup, and the provisional check or capacity with it)."""
    from rest_framework.test import APIRequestFactory

    from apps.accounts.authentication import HashedTokenAuthentication
    from apps.accounts.selectors import visible_team_names
    from apps.accounts.services import create_api_token

    settings.GPUFINOPS_API_CACHE_SECONDS = 0
    users["alice"].teams.add(Team.objects.get_or_create(name="infra")[0])  # two teams: two joined rows
    if who == "alice":
        teams = {"vision", "infra"}
    request = APIRequestFactory().get("/", HTTP_AUTHORIZATION=f"Token {create_api_token(users[who], 30)}")
    HashedTokenAuthentication().authenticate(request)  # a new token's first use is recorded (an update)
    with django_assert_num_queries(1):
        user, _token = HashedTokenAuthentication().authenticate(request)
        assert visible_team_names(user) == teams
    assert visible_team_names(type(user).objects.get(pk=user.pk)) == teams  # the same rule, asked of the database
    path = "/api/v1/usage/?start=2026-11-23&end=2026-11-24&group_by=team,namespace"
    assert clients[who].get(path).status_code == 200  # the client's token's first use is recorded
    # Token and visibility, the grouped rollup, the provisional check (with capacity for those who see every
    # team: one statement on PostgreSQL, two on SQLite).
    from django.db import connection

    with django_assert_max_num_queries(3 if teams is not None or connection.vendor == "postgresql" else 4):
        response = clients[who].get(path)
    assert response.status_code == 200
