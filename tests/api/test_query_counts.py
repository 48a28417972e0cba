"""No endpoint grows a query per row (N+1): each answers in a fixed, small number of queries."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

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
