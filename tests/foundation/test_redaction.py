"""The one redaction home (apps/common/redaction.py) and the Prometheus URL's secret parts (issue 23)."""

from __future__ import annotations

import logging

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.common.redaction import HttpClientLogFilter, hide, redact_url, scrub
from apps.inventory.models import Cluster

HOOK = "https://hooks.example.com/services/T0/B0/Xk3yS3cr3t?token=QtOk9"


@pytest.mark.parametrize("url, shown", [
    (HOOK, "https://hooks.example.com:443"),
    ("http://user:pw@10.0.0.5:9090/prom/K3y", "http://10.0.0.5:9090"),
    ("HTTP://[::1]/x", "http://[::1]:80"),
    ("", ""),
    ("not a url", "(unreadable URL)"),
    ("http://host:notaport/x", "(unreadable URL)"),
])
def test_a_url_is_shown_as_scheme_host_and_port(url, shown):
    assert redact_url(url) == shown


def test_scrub_removes_every_secret_piece_in_any_form_an_http_client_prints():
    said = ("HTTPSConnectionPool(host='hooks.example.com', port=443): Max retries exceeded with url: "
            "/services/T0/B0/Xk3yS3cr3t?token=QtOk9 (Caused by ...); also /services/T0/B0/Xk3yS3cr3t and "
            "token=QtOk9 and %2Fservices and " + HOOK + " and redirected to https://evil.example/p?sEcr3tZ=1")
    clean = scrub(said, HOOK)
    for secret in ("Xk3yS3cr3t", "QtOk9", "sEcr3tZ"):
        assert secret not in clean
    assert "hooks.example.com" in clean and "https://evil.example:443" in clean


def test_hide_removes_a_credential_and_its_basic_header_form():
    text = "401: Authorization: Basic cHJvbXVzZXI6UzNjcmV0 user promuser:S3cret, S3cret"
    assert "S3cret" not in hide(text, "promuser:S3cret") and "cHJvbXVzZXI6UzNjcmV0" not in hide(text, "promuser:S3cret")


def test_urllib3_log_lines_lose_their_paths():
    record = logging.LogRecord("urllib3.connectionpool", logging.DEBUG, __file__, 1, '%s://%s:%s "%s %s %s" %s %s',
                               ("https", "hooks.example.com", 443, "POST", "/services/T0/B0/Xk3yS3cr3t", "HTTP/1.1",
                                500, 0), None)
    assert HttpClientLogFilter().filter(record)
    assert record.getMessage() == 'https://hooks.example.com:443 "POST /… HTTP/1.1" 500 0'


@pytest.mark.django_db
def test_a_prometheus_url_keeps_only_scheme_host_port_and_the_collector_still_gets_everything():
    cluster = Cluster.objects.create(name="p", prometheus_url="https://u:PwD9x@prom.example:9443/tenant/PaThK3y/")
    stored = Cluster.objects.values("prometheus_url", "prometheus_auth_encrypted", "prometheus_path_encrypted").get()
    assert stored["prometheus_url"] == "https://prom.example:9443"
    assert "PaThK3y" not in str(stored) and "PwD9x" not in str(stored)
    cluster.refresh_from_db()
    assert cluster.prometheus_endpoint == "https://prom.example:9443/tenant/PaThK3y"
    assert cluster.prometheus_auth == "u:PwD9x"
    # Saved again without a path (the admin shows only the host), the path stays; a new URL replaces it.
    cluster.save()
    assert Cluster.objects.get().prometheus_endpoint.endswith("/PaThK3y")
    cluster.set_prometheus_url("https://other.example")
    cluster.save()
    assert Cluster.objects.get().prometheus_endpoint == "https://other.example"


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["https://prom.example/api?token=T0kQ", "https://prom.example/#T0kQ"])
def test_a_prometheus_url_with_a_query_is_refused_everywhere_with_a_message_that_does_not_repeat_it(url, admin_client):
    with pytest.raises(ValidationError, match="query"):
        Cluster.objects.create(name="q", prometheus_url=url)
    with pytest.raises(CommandError) as refused:
        call_command("add_cluster", "q", "--prometheus-url", url)
    assert "T0kQ" not in str(refused.value) and "credential" in str(refused.value)
    response = admin_client.post("/admin/inventory/cluster/add/", {
        "name": "q", "source": "kubernetes", "prometheus_url": url, "prometheus_verify_tls": "on",
        "metric_names": "{}"})
    assert response.status_code == 200 and b"is refused" in response.content
    assert b"T0kQ" not in response.content.replace(url.encode(), b"")  # only the field's own value echoes it
    assert not Cluster.objects.exists()
