"""The team rule, safe by default (issue 23): a namespace mapping wins over tenants' labels unless the operator
marks the namespace self-labelling, and a label naming another existing team is always reported."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from apps.inventory.models import NamespaceTeam, Team
from apps.inventory.teams import Mapping_, TeamChoice, TeamRule

KNOWN = {"shop", "research", "finance-team"}


def rule(mappings=None, ns_labels=None) -> TeamRule:
    return TeamRule(mappings or {}, ns_labels or {}, label_key="team", unassigned="unassigned", known_teams=KNOWN)


def test_a_mapping_wins_over_pod_and_namespace_labels_and_the_attempt_is_reported():
    r = rule({"shop": Mapping_("shop", enforced=True)}, {"shop": {"team": "finance-team"}})
    assert r.for_object({"team": "research"}, "shop") == TeamChoice("shop", "research", "enforced")
    assert r.for_object({}, "shop") == TeamChoice("shop", "finance-team", "enforced")  # the namespace label too
    assert r.for_object({"team": "shop"}, "shop") == TeamChoice("shop")
    assert r.for_object({"team": "no-such-team"}, "shop") == TeamChoice("shop", "no-such-team", "enforced")


def test_in_a_self_labelling_namespace_labels_decide_and_another_existing_team_is_reported():
    r = rule({"lab": Mapping_("research", enforced=False)})
    assert r.for_object({}, "lab") == TeamChoice("research")
    assert r.for_object({"team": "research"}, "lab") == TeamChoice("research")
    choice = r.for_object({"team": "shop"}, "lab")
    assert choice == TeamChoice("shop", "shop", "other_team") and choice.obeyed
    # A new team name (not an existing team) is the tenant's own business: obeyed, not reported.
    assert r.for_object({"team": "new-project"}, "lab") == TeamChoice("new-project")
    assert r.for_object({"team": "=cmd()"}, "lab") == TeamChoice("unassigned", "=cmd()", "invalid")


def test_without_a_mapping_a_pod_label_naming_another_team_than_its_namespace_label_is_reported():
    r = rule(ns_labels={"ml": {"team": "research"}})
    assert r.for_object({"team": "shop"}, "ml") == TeamChoice("shop", "shop", "other_team")
    assert r.for_object({}, "ml") == TeamChoice("research")
    assert rule().for_object({"team": "shop"}, "anywhere") == TeamChoice("shop")  # nothing to compare with
    assert rule().for_object({}, "anywhere") == TeamChoice("unassigned")


@pytest.mark.django_db
def test_map_namespace_is_enforced_unless_marked_self_labelling():
    call_command("map_namespace", "shop", "shop", "--create")
    assert NamespaceTeam.objects.get(namespace="shop").enforced
    call_command("map_namespace", "lab", "shop", "--self-labelling")
    assert not NamespaceTeam.objects.get(namespace="lab").enforced
    call_command("map_namespace", "old", "shop", "--enforced")  # old scripts still work
    assert NamespaceTeam.objects.get(namespace="old").enforced
    assert NamespaceTeam(namespace="x", team=Team.objects.get(name="shop")).enforced  # the admin's default too
