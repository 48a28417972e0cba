"""The harness itself: skip locally, fail in CI."""

from __future__ import annotations

import pytest

from tests.harness.services import require_service


def test_it_skips_a_missing_service_locally(monkeypatch):
    monkeypatch.delenv("GPUFINOPS_REQUIRE_SERVICES", raising=False)
    with pytest.raises(pytest.skip.Exception, match="redis unavailable: down"):
        require_service("redis", "down")


def test_it_fails_a_missing_service_in_ci(monkeypatch):
    monkeypatch.setenv("GPUFINOPS_REQUIRE_SERVICES", "1")
    with pytest.raises(pytest.fail.Exception, match="redis unavailable: down"):
        require_service("redis", "down")


def test_it_runs_on_postgresql_when_services_are_required(postgres_db):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database()")
        assert cursor.fetchone()[0].startswith("test_")


def test_it_receives_mail_on_a_real_smtp_server(smtp_settings):
    from django.core.mail import send_mail

    send_mail("Weekly GPU report", "Body", "gpufinops@example.com", ["finance@example.com"])
    assert [message.subject for message in smtp_settings.messages] == ["Weekly GPU report"]
    assert smtp_settings.messages[0].rcpt_tos == ["finance@example.com"]
