"""The finance report e-mail, end to end against a real SMTP server (aiosmtpd): periods, editions (provisional,
final, restated), what the e-mail prints and attaches, and that it is sent once per subscription and edition."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from apps.inventory.models import Cluster
from apps.reports import emails
from apps.reports.models import ReportDelivery, ReportEdition, ReportSubscription
from apps.reports.periods import parse_period
from apps.reports.services import send_reports
from apps.usage.ledger import PodFact
from tests.reports.conftest import (
    END,
    NOW,
    START,
    attachments,
    by_rcpt,
    csv_rows,
    fill,
    html_part,
    series,
    sha256,
    standard_pods,
    text_part,
    write_hour,
)

pytestmark = pytest.mark.services


def subject(message) -> str:
    """The subject as a mail client shows it (unfolded)."""
    return str(message["Subject"]).strip()


def subscribe(user, cadence="weekly", teams=()):
    return ReportSubscription.objects.create(user=user, email=user.email, cadence=cadence, teams=list(teams))


def test_a_final_week_reaches_each_subscriber_once_with_the_files_it_prints_the_digests_of(
        week, people, smtp_settings, settings):
    settings.GPUFINOPS_BASE_URL = "https://gpufinops.example.com"
    subscribe(people.finance)
    lead_sub = subscribe(people.lead)
    outcome = send_reports(now=NOW)
    assert [p.period.label for p in outcome.periods] == ["2026-W47", "2026-10"]
    mail = by_rcpt(smtp_settings)
    assert set(mail) == {"finance@example.com", "vision-lead@example.com"}
    finance, lead = mail["finance@example.com"][0], mail["vision-lead@example.com"][0]

    # Subject: period, UTC bounds, status, total, scope.
    assert subject(finance) == ("[GPU chargeback] 2026-W47 (Mon 16 Nov 00:00 – Mon 23 Nov 00:00 UTC) — FINAL — "
                                  "$4,479.96 — all teams")
    # vision: 2 GPUs x 168 h x 3.3333 USD = 1,119.9888 USD.
    assert subject(lead).endswith("— FINAL — $1,119.99 — team vision")

    # Attachments named by period, edition and scope, base64, digests as printed and as archived.
    for message, scope in ((finance, "all"), (lead, "team-vision")):
        files = attachments(message)
        assert set(files) == {f"gpufinops-2026-W47-final-{scope}.csv", f"gpufinops-2026-W47-final-{scope}-focus.csv"}
        edition = ReportEdition.objects.get(period="2026-W47", scope=scope)
        for name, data in files.items():
            assert f"SHA-256 {sha256(data)}" in text_part(message)
            assert sha256(data) in html_part(message)
            assert data.count(b"\r\n") == data.count(b"\n") > 1  # CRLF survived the trip
            stored = bytes(edition.focus_bytes if name.endswith("-focus.csv") else edition.csv_bytes)
            assert data == stored
        assert edition.csv_sha256 == sha256(files[f"gpufinops-2026-W47-final-{scope}.csv"])
    assert {r["team"] for r in csv_rows(attachments(lead)["gpufinops-2026-W47-final-team-vision.csv"])} == {"vision"}
    assert {r["SubAccountId"] for r in csv_rows(attachments(lead)["gpufinops-2026-W47-final-team-vision-focus.csv"])} \
        == {"vision"}

    # Capacity and other teams are for all-team readers only.
    lead_text = text_part(lead)
    assert "Unallocated" not in lead_text and "nlp" not in lead_text and "research" not in lead_text
    finance_text = text_part(finance)
    assert "Unallocated capacity (platform)" in finance_text and "unpriced" in finance_text

    # Absolute links, never repository paths; a List-Unsubscribe header and link.
    assert "docs/" not in finance_text and "https://gpufinops.example.com/reports/?period=2026-W47" in finance_text
    assert str(lead["List-Unsubscribe"]).strip().startswith("<https://gpufinops.example.com/reports/unsubscribe/")
    assert lead["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"

    # The archive renders the same e-mail again, byte for byte, and kept what was sent.
    delivery = ReportDelivery.objects.get(subscription=lead_sub)
    rendered = emails.render(delivery.edition, lead_sub)
    assert rendered.text == delivery.text_body == lead_text
    assert rendered.subject == subject(lead)

    # A duplicate beat tick sends nothing more.
    again = send_reports(now=NOW + timedelta(hours=1))
    assert again.sent == [] and len(smtp_settings.messages) == 2
    assert set(ReportDelivery.objects.values_list("status", flat=True)) == {"sent"}


def test_a_forced_provisional_edition_never_blocks_the_final_one(prod, people, smtp_settings):
    subscribe(people.finance)
    fill(prod, START, END - timedelta(hours=10))
    waiting = send_reports(now=NOW)
    assert waiting.sent == [] and "prod: 158 of 168 hours final (10 not collected)" in waiting.periods[0].waiting

    forced = send_reports(now=NOW, force=True)
    assert len(forced.sent) == 1
    provisional = smtp_settings.messages[-1].message
    assert "— PROVISIONAL v1 (coverage 94.0 %) —" in subject(provisional)
    text = text_part(provisional)
    assert "Status: PROVISIONAL" in text and "prod: 158 of 168 hours final (94.0 %), 10 not collected" in text
    assert set(attachments(provisional)) == {"gpufinops-2026-W47-provisional-v1-all.csv",
                                             "gpufinops-2026-W47-provisional-v1-all-focus.csv"}
    # Forcing again with the same figures is the same edition: nothing new is sent.
    assert send_reports(now=NOW, force=True).sent == []

    fill(prod, END - timedelta(hours=10), END)
    final = send_reports(now=NOW + timedelta(hours=1))
    assert len(final.sent) == 1 and len(smtp_settings.messages) == 2
    message = smtp_settings.messages[-1].message
    assert "— FINAL —" in subject(message) and "Status: FINAL" in text_part(message)
    assert "gpufinops-2026-W47-final-all.csv" in attachments(message)
    assert list(ReportEdition.objects.order_by("version").values_list("version", "status")) == [
        (1, "provisional"), (2, "final")]


def test_a_partial_week_stays_provisional_with_its_coverage_printed(prod, people, smtp_settings):
    subscribe(people.finance)
    fill(prod, START + timedelta(hours=22), END)  # data from Monday 22:00, like the demo
    for hours_later in (1, 30, 24 * 9):
        outcome = send_reports(now=NOW + timedelta(hours=hours_later), period=parse_period("2026-W47"))
        assert outcome.sent == [] and not outcome.periods[0].final
    assert "prod: 146 of 168 hours final (22 not collected)" in outcome.periods[0].waiting

    send_reports(now=NOW, force=True, period=parse_period("2026-W47"))
    message = smtp_settings.messages[-1].message
    assert "PROVISIONAL v1 (coverage 86.9 %)" in subject(message)
    assert "prod: 146 of 168 hours final (86.9 %), 22 not collected" in text_part(message)

    # A forced send in the middle of a week says the week is not over, not that its hours are "provisional".
    fill(prod, END, END + timedelta(hours=50))
    send_reports(now=END + timedelta(hours=50), force=True, period=parse_period("2026-W48"))
    text = text_part(smtp_settings.messages[-1].message)
    assert "the week is not over (50 of 168 hours so far)" in text
    assert "the week is not over: 50 of its 168 hours have passed" in text


def test_a_restatement_after_a_recollected_hour_lists_the_changes_per_team(week, people, smtp_settings):
    finance_sub = subscribe(people.finance)
    subscribe(people.lead)
    send_reports(now=NOW)
    assert len(smtp_settings.messages) == 2
    first = ReportEdition.objects.get(scope="all")

    # Hour 30 is collected again and now has nlp on two GPUs: its figures change, vision's do not.
    pods, found = standard_pods(extra_nlp_gpus=1)
    write_hour(week, START + timedelta(hours=30), pods, found, owner="recollect")
    outcome = send_reports(now=NOW + timedelta(hours=3))
    assert [str(e) for e in ReportEdition.objects.filter(scope="all").order_by("version")] == [
        "2026-W47 all v1 final", "2026-W47 all v2 restated"]
    assert not ReportEdition.objects.filter(scope="team-vision", version=2).exists()  # vision unchanged
    assert outcome.sent == ["2026-W47 finance@example.com (restated v2)"] and len(smtp_settings.messages) == 3

    message = smtp_settings.messages[-1].message
    assert "— RESTATED v2 —" in subject(message)
    text = text_part(message)
    assert "CHANGES SINCE VERSION 1" in text and "Status: RESTATED" in text
    restated = ReportEdition.objects.get(scope="all", version=2)
    changes = {c["name"]: c for c in restated.figures["restatement"]["rows"]}
    assert set(changes) == {"nlp", "Unallocated capacity (platform)"}
    # One more GPU for 2222 s at 3.3333 USD: +2.0574 USD to nlp, the same amount less unallocated.
    nlp = changes["nlp"]
    assert Decimal(nlp["delta"]) in (Decimal("2.05"), Decimal("2.06"))
    assert Decimal(nlp["new_cost"]) - Decimal(nlp["old_cost"]) == Decimal(nlp["delta"])
    assert Decimal(changes["Unallocated capacity (platform)"]["delta"]) == -Decimal(nlp["delta"])
    assert restated.figures["restatement"]["delta_total"] == "0.00"
    assert f"{nlp['delta']}" in text.replace("$", "") and "nlp" in text.split("CHANGES SINCE VERSION 1")[1][:400]
    for name, data in attachments(message).items():
        assert name.startswith("gpufinops-2026-W47-restated-v2-all")
        assert sha256(data) in text
    assert restated.csv_sha256 != first.csv_sha256
    assert ReportDelivery.objects.filter(subscription=finance_sub, status="sent").count() == 2

    # Nothing changes, nothing is sent; the same recipients only.
    assert send_reports(now=NOW + timedelta(hours=4)).sent == []


def test_weekly_and_monthly_are_each_sent_once(prod, people, smtp_settings):
    """February 2026 (and the first day of March, which closes week 2026-W09), every hour final."""
    subscribe(people.finance, "weekly")
    subscribe(people.finance, "monthly")
    one_pod = PodFact("u-1", "cv", "train-0", "n1", "vision", {"nvidia.com/gpu": 2}, 3600.0, workload="Job/train")
    start = parse_period("2026-02").start
    fill(prod, start, start + timedelta(days=29),
         make=lambda h: ([one_pod], [series("cv", "train-0", "GPU-1", 0.5), series("cv", "train-0", "GPU-2", 0.5)]))
    now = start + timedelta(days=29, hours=3)  # Monday 2 March 2026, 03:00
    outcome = send_reports(now=now)
    assert [(p.period.label, p.final, len(p.sent)) for p in outcome.periods] == [("2026-W09", True, 1),
                                                                                ("2026-02", True, 1)]
    subjects = sorted(subject(m.message) for m in smtp_settings.messages)
    assert subjects[0].startswith("[GPU chargeback] 2026-02 (Sun 1 Feb 00:00 – Sun 1 Mar 00:00 UTC) — FINAL")
    assert subjects[1].startswith("[GPU chargeback] 2026-W09 (Mon 23 Feb 00:00 – Mon 2 Mar 00:00 UTC) — FINAL")
    monthly = next(m.message for m in smtp_settings.messages if "2026-02 (" in m.subject)
    # The fleet's capacity: 8 priced GPUs x 672 h x 3.3333 USD (vision holds 2 of them).
    assert "$17,919.82" in subject(monthly)
    # vision: 4,479.9552 USD exactly; printed 4,479.95 because the unallocated 13,439.8656 has the larger remainder
    # and the two must add up to the printed 17,919.82 (largest remainder, docs/reports.md).
    assert "$4,479.95" in text_part(monthly) and "$13,439.87" in text_part(monthly)
    assert "gpufinops-2026-02-final-all.csv" in attachments(monthly)
    # The month-end e-mail says where March, now in progress, is heading (apps.budgets.forecast): 159.9984 USD a day
    # (2 GPUs x 24 h x 3.3333) spent on 1 March, the same every day of the 28 days of history (no pattern, no
    # spread), and 29.875 days left from 2 March 03:00: 159.9984 x 30.875 = 4,939.9506.
    text = text_part(monthly)
    assert "FORECAST (the month now in progress" in text and 'docs/numbers.md, "Forecast"' in text
    assert ("2026-03: $160.00 spent so far, forecast $4,939.95 at the end of the month (range $4,939.95 to "
            "$4,939.95)") in " ".join(text.split())
    assert "Forecast: 2026-03, the month now in progress" in html_part(monthly)
    edition = ReportEdition.objects.get(period="2026-02", kind="monthly")
    assert edition.figures["forecast"]["expected"] == "4939.95" and edition.figures["forecast"]["of"] == "next"
    weekly = ReportEdition.objects.get(period="2026-W09")
    assert weekly.figures["forecast"] is None
    # Every later check, weekly or monthly, sends nothing more.
    for hours in (1, 2, 24):
        assert send_reports(now=now + timedelta(hours=hours)).sent == []
    assert len(smtp_settings.messages) == 2


def test_hostile_names_are_text_in_every_part_and_neutralised_in_the_csv_files(prod, people, smtp_settings):
    hostile_team = '=HYPERLINK("http://evil.example/","Pay here")'
    hostile_ns = "<img src=x onerror=alert(1)>"

    def make(hour):
        pods, found = standard_pods()
        pods.append(PodFact("u-evil", hostile_ns, "p", "n1", hostile_team, {"nvidia.com/gpu": 1}, 3600.0))
        return pods, [*found, series(hostile_ns, "p", "GPU-e", 0.0)]

    fill(prod, START, END, make=make)
    subscribe(people.finance)
    send_reports(now=NOW)
    message = smtp_settings.messages[0].message
    files = attachments(message)
    teams = {r["team"] for r in csv_rows(files["gpufinops-2026-W47-final-all.csv"])}
    assert "'" + hostile_team in teams and hostile_team not in teams
    focus_rows = csv_rows(files["gpufinops-2026-W47-final-all-focus.csv"])
    assert "'" + hostile_team in {r["SubAccountId"] for r in focus_rows}
    assert not any(v.startswith(("=", "+", "@")) for r in focus_rows for v in r.values() if v)
    # The plain text carries the names as they are (never HTML-escaped); the HTML escapes them.
    text, html = text_part(message), html_part(message)
    assert hostile_team in text and hostile_ns in text and "&quot;" not in text and "&lt;" not in text
    assert hostile_ns not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_the_unsubscribe_link_stops_the_subscription(week, people, smtp_settings):
    sub = subscribe(people.lead)
    send_reports(now=NOW)
    url = str(smtp_settings.messages[0].message["List-Unsubscribe"]).strip().strip("<>")
    path = url.split("://", 1)[1].split("/", 1)[1]
    client = Client(enforce_csrf_checks=True)
    page = client.get(f"/{path}")
    assert page.status_code == 200 and b"Unsubscribe" in page.content and b"vision-lead@example.com" in page.content
    assert client.get(f"/{path[:-8]}xxxxxxx/").status_code == 404  # a forged or cut token
    # RFC 8058 one-click: a POST without session or CSRF token.
    done = client.post(f"/{path}", {"List-Unsubscribe": "One-Click"})
    assert done.status_code == 200
    sub.refresh_from_db()
    assert not sub.active
    fill(week, END, END + timedelta(days=7))
    assert send_reports(now=NOW + timedelta(days=7)).sent == []


def test_an_smtp_failure_is_recorded_and_retried(week, people, smtp_settings, settings):
    subscribe(people.finance)
    subscribe(people.lead)
    settings.EMAIL_PORT = smtp_settings.port + 1 if smtp_settings.port < 65535 else 1  # nothing listens there
    failed = send_reports(now=NOW)
    assert set(failed.failed) == {"2026-W47 finance@example.com", "2026-W47 vision-lead@example.com"}
    assert set(ReportDelivery.objects.values_list("status", flat=True)) == {"failed"}
    settings.EMAIL_PORT = smtp_settings.port
    retried = send_reports(now=NOW)
    assert len(retried.sent) == 2 and len(smtp_settings.messages) == 2
    assert ReportEdition.objects.count() == 2  # the retry sends the same editions


def test_it_has_a_command_twin(week, people, smtp_settings, capsys):
    subscribe(people.finance)
    call_command("send_reports", "--now", NOW.isoformat(), "--kind", "weekly")
    out = capsys.readouterr().out
    assert "2026-W47 (2026-11-16 .. 2026-11-23): final; 1 new edition(s), 1 sent" in out
    assert len(smtp_settings.messages) == 1
    call_command("send_reports", "--now", NOW.isoformat(), "--period", "2026-W47")
    assert "1 skipped" in capsys.readouterr().out and len(smtp_settings.messages) == 1
    with pytest.raises(CommandError, match="--period"):
        call_command("send_reports", "--period", "2026-W60")
    assert Cluster.objects.count() == 1


def test_a_file_too_large_to_attach_stays_in_the_archive_with_its_link_and_digest(week, people, smtp_settings,
                                                                                  settings):
    settings.GPUFINOPS_REPORT_MAX_ATTACHMENT_BYTES = 5000  # the week's CSV is smaller, its FOCUS file larger
    subscribe(people.finance)
    send_reports(now=NOW)
    message = smtp_settings.messages[0].message
    assert set(attachments(message)) == {"gpufinops-2026-W47-final-all.csv"}
    edition = ReportEdition.objects.get(scope="all")
    text = text_part(message)
    size = f"{len(edition.focus_bytes) / 1e6:.1f} MB"
    assert (f"gpufinops-2026-W47-final-all-focus.csv (not attached: {size}; "
            "http://127.0.0.1:8000/api/v1/reports/2026-W47/focus?scope=all&version=1)") in text
    assert f"SHA-256 {edition.focus_sha256}" in text
