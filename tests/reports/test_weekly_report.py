"""The weekly report reaches a real SMTP server once per sealed week, with the ledger's numbers and CSV."""

from __future__ import annotations

import csv
import hashlib
import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command

from apps.inventory.gpus import GpuNode
from apps.inventory.models import Cluster
from apps.reports.models import ReportRun, ReportSubscription
from apps.reports.services import last_complete_week, send_weekly_reports
from apps.usage import services as ledger
from apps.usage.activity import SIGNALS
from apps.usage.ledger import BucketInputs, NodeFact, PodFact, SeriesFact, compute_bucket
from apps.usage.models import Bucket

START = datetime(2026, 11, 16, tzinfo=UTC)  # a Monday
END = START + timedelta(days=7)
NOW = END + timedelta(hours=2)
NODE = NodeFact("n1", "pool", GpuNode("NVIDIA-H100-80GB-HBM3", 8, "none", 7), 3600.0, False, Decimal("4.00"))


def fill_week(cluster: Cluster) -> None:
    pods = [PodFact("u-v", "cv", "train", "n1", "vision", {"nvidia.com/gpu": 2}, 3600.0),
            PodFact("u-n", "text", "serve", "n1", "nlp", {"nvidia.com/gpu": 1}, 3600.0)]
    series = [SeriesFact("cv", "train", "GPU-1", "", "", dict.fromkeys(SIGNALS, 0.5)),
              SeriesFact("cv", "train", "GPU-2", "", "", dict.fromkeys(SIGNALS, 0.5)),
              SeriesFact("text", "serve", "GPU-3", "", "", dict.fromkeys(SIGNALS, 0.25))]
    for i in range(7 * 24):
        hour = START + timedelta(hours=i)
        assert ledger.claim_bucket(cluster, hour, "t")
        result = compute_bucket(BucketInputs(hour, 3600, [NODE], pods, series))
        ledger.write_bucket(cluster, hour, result, owner="t", covered_until=hour + timedelta(hours=1))


@pytest.fixture
def week(db):
    fill_week(Cluster.objects.create(name="prod"))
    ReportSubscription.objects.create(email="finance@example.com")
    ReportSubscription.objects.create(email="vision-lead@example.com", teams=["vision"])


def csv_rows(message) -> list[dict]:
    attachment = next(p for p in message.iter_attachments() if p.get_filename().endswith(".csv"))
    return list(csv.DictReader(io.StringIO(attachment.get_content())))


def test_it_picks_the_last_complete_monday_week():
    assert last_complete_week(datetime(2026, 11, 25, 15, tzinfo=UTC)) == (START, END)  # Wednesday
    assert last_complete_week(NOW) == (START, END)  # Monday 02:00
    assert last_complete_week(END - timedelta(seconds=1)) == (START - timedelta(days=7), START)  # Sunday night


def test_it_emails_each_subscription_once_with_its_teams_numbers(week, smtp_settings):
    outcome = send_weekly_reports(now=NOW)
    assert sorted(outcome.sent) == ["finance@example.com", "vision-lead@example.com"]
    by_rcpt = {m.rcpt_tos[0]: m for m in smtp_settings.messages}
    finance, lead = by_rcpt["finance@example.com"].message, by_rcpt["vision-lead@example.com"].message
    # 168 h x 3 GPUs x 4 USD = 2016 USD; vision alone 168 x 2 x 4 = 1344 USD.
    assert "2016 USD" in finance["Subject"].replace(",", "") and "2026-11-16" in finance["Subject"]
    assert "1344 USD" in lead["Subject"].replace(",", "")
    assert {r["team"] for r in csv_rows(finance)} == {"vision", "nlp"}
    vision = csv_rows(lead)
    assert {r["team"] for r in vision} == {"vision"}
    assert float(vision[0]["allocated_gpu_hours"]) == pytest.approx(336.0)
    assert float(vision[0]["working_gpu_hours"]) == pytest.approx(168.0)
    body = finance.get_body(("plain",)).get_content()
    assert "Unallocated GPU-hours" in body and "nlp" in body
    # vision works 50 %, nlp 25 % of its hours: (168 + 42) / 504 = 42 % by SM activity.
    assert "Busy, by SM activity: 42 %" in body
    attachment = next(p for p in finance.iter_attachments() if p.get_filename().endswith(".csv"))
    digest = hashlib.sha256(attachment.get_payload(decode=True)).hexdigest()
    assert digest in body
    assert ReportRun.objects.get(subscription__email="finance@example.com").csv_sha256 == digest
    assert "Unallocated" not in lead.get_body(("plain",)).get_content()  # capacity is for all-team readers only
    # Running again (a duplicate beat tick) sends nothing more.
    again = send_weekly_reports(now=NOW + timedelta(hours=1))
    assert again.sent == [] and len(smtp_settings.messages) == 2
    assert set(ReportRun.objects.values_list("status", flat=True)) == {"sent"}


def test_it_waits_until_every_hour_of_the_week_is_final(week, smtp_settings):
    Bucket.objects.filter(hour=START + timedelta(hours=30)).update(state="provisional")
    outcome = send_weekly_reports(now=NOW)
    assert outcome.waiting == "prod: 167 of 168 hours final"
    assert smtp_settings.messages == [] and not ReportRun.objects.exists()


def test_it_records_an_smtp_failure_and_retries_it(week, smtp_settings, settings):
    settings.EMAIL_PORT = smtp_settings.port + 1 if smtp_settings.port < 65535 else 1  # nothing listens there
    failed = send_weekly_reports(now=NOW)
    assert set(failed.failed) == {"finance@example.com", "vision-lead@example.com"}
    assert set(ReportRun.objects.values_list("status", flat=True)) == {"failed"}
    settings.EMAIL_PORT = smtp_settings.port
    retried = send_weekly_reports(now=NOW)
    assert len(retried.sent) == 2 and len(smtp_settings.messages) == 2


def test_it_has_a_command_twin(week, smtp_settings, capsys):
    call_command("send_reports", "--now", NOW.isoformat())
    assert "2 sent" in capsys.readouterr().out
    assert len(smtp_settings.messages) == 2
