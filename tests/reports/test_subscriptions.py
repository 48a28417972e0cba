"""Report subscriptions belong to a person, cover only teams that person may see, and never fail open (issue 11)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.inventory.models import Team
from apps.reports.models import ReportSubscription
from apps.reports.subscriptions import resolve_scope, subscribe


def test_the_command_resolves_the_email_to_a_person_and_checks_every_team(people, capsys):
    call_command("add_report_subscription", "finance@example.com")
    out = capsys.readouterr().out
    assert "fin <finance@example.com> weekly, now covering all teams with the fleet's capacity" in out
    call_command("add_report_subscription", "FINANCE@example.com", "--monthly", "--team", "nlp")
    assert "monthly, now covering team nlp" in capsys.readouterr().out
    call_command("add_report_subscription", "vision-lead@example.com")
    assert "now covering team vision" in capsys.readouterr().out
    assert {(s.user.username, s.cadence, tuple(s.teams)) for s in ReportSubscription.objects.all()} == {
        ("fin", "weekly", ()), ("fin", "monthly", ("nlp",)), ("vlead", "weekly", ())}

    refusals = {
        ("nobody@example.com",): "no person has the e-mail address nobody@example.com",
        ("not-an-address",): "not an e-mail address",
        ("finance@example.com", "--team", "nope"): "unknown team(s): nope",
        ("vision-lead@example.com", "--team", "nlp"): "vlead may not see team(s) nlp",
        ("vision-lead@example.com", "--team", "vision", "--team", "research"): "may not see team(s) research",
        ("loner@example.com",): "loner is on no team and not finance or staff",
        ("finance@example.com", "--team", ""): "an empty team name",
    }
    for args, reason in refusals.items():
        with pytest.raises(CommandError, match=reason.replace("(", r"\(").replace(")", r"\)")):
            call_command("add_report_subscription", *args)
    assert ReportSubscription.objects.count() == 3


def test_an_empty_scope_is_what_the_person_may_see_at_send_time(people):
    lead_sub, _ = subscribe("vision-lead@example.com")
    finance_sub, _ = subscribe("finance@example.com")
    scope, _ = resolve_scope(finance_sub)
    assert scope.key == "all" and scope.fleet
    scope, _ = resolve_scope(lead_sub)
    assert scope.key == "team-vision" and not scope.fleet
    Team.objects.get(name="nlp").members.add(people.lead)
    assert resolve_scope(lead_sub)[0].key == "team-nlp+vision"
    # The lead leaves both teams: nothing is sent to them, never "every team".
    for team in Team.objects.filter(name__in=["nlp", "vision"]):
        team.members.remove(people.lead)
    assert resolve_scope(lead_sub) == (None, "vlead is on no team")
    # Named teams the person can no longer see are dropped; none left means nothing.
    named, _ = subscribe("finance@example.com", ["vision"], cadence="monthly")
    people.finance.groups.clear()
    assert resolve_scope(named) == (None, "fin may no longer see any of the subscribed teams")
    people.lead.is_active = False
    people.lead.save()
    assert resolve_scope(lead_sub)[0] is None


def test_a_blank_or_broken_teams_field_never_means_every_team(people):
    sub = ReportSubscription.objects.create(user=people.lead, email=people.lead.email)
    sub.teams = None  # what a blank JSON field in a form gives
    assert sub.team_names == []
    assert resolve_scope(sub)[0].key == "team-vision"
    sub.teams = ""
    assert resolve_scope(sub)[0].key == "team-vision"
    sub.teams = ["nlp"]  # stored behind the rule's back (a direct database edit): still only what they may see
    assert resolve_scope(sub) == (None, "vlead may no longer see any of the subscribed teams")
    legacy = ReportSubscription.objects.create(email="old@example.com")  # no person
    assert resolve_scope(legacy) == (None, "the subscription belongs to no person")
    with pytest.raises(ValidationError):
        ReportSubscription(user=people.loner, email="loner@example.com", teams=[]).full_clean()
    with pytest.raises(ValidationError):
        ReportSubscription(user=people.lead, email="x@example.com", teams="vision").full_clean()


def test_the_admin_validates_the_scope_and_a_blank_field_is_no_error(people, client):
    client.force_login(people.staff)
    people.staff.is_superuser = True
    people.staff.save()
    url = "/admin/reports/reportsubscription/add/"
    blank = client.post(url, {"user": people.lead.pk, "cadence": "weekly", "active": "on"})
    assert blank.status_code == 302
    assert ReportSubscription.objects.get(user=people.lead).teams == []
    vision = Team.objects.get(name="vision")
    nlp = Team.objects.get(name="nlp")
    refused = client.post(url, {"user": people.lead.pk, "cadence": "monthly", "teams": [nlp.name], "active": "on"})
    assert refused.status_code == 200 and b"may not see team(s) nlp" in refused.content
    loner = client.post(url, {"user": people.loner.pk, "cadence": "weekly", "active": "on"})
    assert loner.status_code == 200 and b"on no team" in loner.content
    ok = client.post(url, {"user": people.finance.pk, "cadence": "weekly", "teams": [vision.name, nlp.name],
                           "active": "on"})
    assert ok.status_code == 302
    assert ReportSubscription.objects.get(user=people.finance).teams == ["nlp", "vision"]


def test_existing_subscriptions_are_tied_to_people_by_the_migration(people):
    """The data step of migration 0003: an old subscription gets the one person with its address, or stops."""
    from importlib import import_module

    from django.apps import apps as global_apps

    link_people = import_module("apps.reports.migrations.0003_editions_and_people").link_people
    matched = ReportSubscription.objects.create(email="Vision-Lead@example.com")
    orphan = ReportSubscription.objects.create(email="gone@example.com")
    link_people(global_apps, None)
    matched.refresh_from_db()
    orphan.refresh_from_db()
    assert matched.user == people.lead and matched.active
    assert orphan.user is None and not orphan.active
