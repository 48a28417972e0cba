"""`/api/v1/savings/` and `/savings/` on an empty ledger and with bad input: an empty list (not an error), the one
error envelope naming the parameter, and a team member's page never offering another team."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def member(client, django_user_model):
    from apps.accounts.services import add_team_member

    user = django_user_model.objects.create_user("mia")
    add_team_member("vision", "mia", create=True)
    from apps.inventory.models import Team

    Team.objects.get_or_create(name="research")
    client.force_login(user)
    return client


def test_empty_ledger_is_an_empty_list(member):
    r = member.get("/api/v1/savings/", {"days": "7"})
    assert r.status_code == 200, r.content
    body = r.json()
    assert (body["count"], body["results"]) == (0, [])
    assert {"start", "end"} <= set(body)
    page = member.get("/savings/")
    assert page.status_code == 200
    assert "Nothing to save in this period" in page.content.decode()


@pytest.mark.parametrize(("params", "name"), [
    ({"days": "x"}, "days"), ({"period": "2026-W99"}, "period"), ({"format": "xml"}, "format"),
    ({"team": "research"}, "team"), ({"page": "0"}, "page"),
])
def test_bad_input_is_named(member, params, name):
    r = member.get("/api/v1/savings/", params)
    assert r.status_code == 400, r.content
    assert name in r.json()["errors"], r.json()


def test_the_page_refuses_another_team(member):
    page = member.get("/savings/", {"team": "research"})
    assert page.status_code == 200
    html = page.content.decode()
    assert "not visible to you" in html
    assert '<option>research</option>' not in html
