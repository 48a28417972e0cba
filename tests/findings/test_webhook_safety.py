"""Webhooks only reach the public internet (issue 23): loopback, private, link-local and metadata targets, IPv6
forms of them and names resolving to them are refused before a byte is sent; redirects are never followed;
timeouts are bounded. Real listeners on loopback stand in for the internal services an attacker would aim at."""

from __future__ import annotations

import ipaddress

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.common import outbound
from apps.findings.models import Notification
from apps.findings.notifications import send_notifications
from tests.findings.listeners import Listener, channel, idle_finding

SECRET_PATH = "/hooks/T0SECRET/B0SECRET/xoxSECRETKEY"


@pytest.mark.parametrize("address", [
    "127.0.0.1", "127.1.2.3", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0",
    "224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fc00::1", "fd00:ec2::254", "::ffff:127.0.0.1",
    "::ffff:169.254.169.254", "2002:7f00:1::1", "2002:a9fe:a9fe::1", "64:ff9b::a9fe:a9fe", "ff02::1",
])
def test_internal_addresses_are_refused(address):
    assert outbound.refused_address(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"])
def test_public_addresses_are_allowed(address):
    assert not outbound.refused_address(ipaddress.ip_address(address))


def send_once() -> Notification:
    send_notifications()
    return Notification.objects.get()


@pytest.mark.django_db
@pytest.mark.parametrize("host, url_host", [
    ("127.0.0.1", "127.0.0.1"), ("::1", "[::1]"), ("127.0.0.1", "localhost"), ("127.0.0.1", "127.1"),
    ("127.0.0.1", "2130706433"),  # 127.0.0.1 as one decimal number
])
def test_a_webhook_aimed_at_a_loopback_listener_never_reaches_it(host, url_host):
    listener = Listener(host)
    try:
        idle_finding()
        channel(f"http://{url_host}:{listener.port}{SECRET_PATH}")
        notification = send_once()
    finally:
        listener.close()
    assert listener.hits == []
    assert notification.status == Notification.Status.PENDING and notification.attempts == 1
    assert "refused" in notification.last_error and "not a public address" in notification.last_error
    assert "SECRET" not in notification.last_error


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/iam/", "http://10.255.255.1:8080/x",
                                 "http://[fd00:ec2::254]/latest/", "http://[::ffff:169.254.169.254]/"])
def test_metadata_and_private_targets_are_refused_without_connecting(url):
    idle_finding()
    channel(url)
    notification = send_once()
    assert "refused" in notification.last_error and "not a public address" in notification.last_error


@pytest.mark.django_db
@pytest.mark.parametrize("location_host", ["127.0.0.1", "169.254.169.254"])
def test_redirects_are_not_followed(settings, location_host):
    inner = Listener()
    # The first hop is an internal host the operator allowed by name; its redirect to elsewhere is not followed.
    settings.GPUFINOPS_WEBHOOK_ALLOWED_HOSTS = ["localhost"]
    target = f"http://{location_host}:{inner.port}/admin" if location_host == "127.0.0.1" else \
        f"http://{location_host}/latest/meta-data/"
    outer = Listener(status=302, location=target)
    try:
        idle_finding()
        channel(f"http://localhost:{outer.port}{SECRET_PATH}")
        notification = send_once()
    finally:
        outer.close()
        inner.close()
    assert outer.hits == [SECRET_PATH] and inner.hits == []
    assert "redirect, not followed" in notification.last_error
    assert notification.status == Notification.Status.PENDING


@pytest.mark.django_db
def test_a_named_internal_host_may_be_allowed_and_nothing_else(settings):
    listener = Listener()
    try:
        idle_finding()
        channel(f"http://localhost:{listener.port}/hook")
        assert "refused" in send_once().last_error and listener.hits == []
        settings.GPUFINOPS_WEBHOOK_ALLOWED_HOSTS = ["localhost"]
        Notification.objects.update(next_attempt_at=None)
        assert send_once().status == Notification.Status.SENT
        assert listener.hits == ["/hook"]
        # Allowing a name does not allow the address it resolves to under another name.
        assert outbound.target_problem(f"http://127.0.0.1:{listener.port}/hook")
    finally:
        listener.close()


@pytest.mark.django_db
def test_timeouts_are_bounded(settings):
    settings.GPUFINOPS_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.GPUFINOPS_WEBHOOK_TIMEOUT = 0.3
    listener = Listener(delay=3)
    try:
        idle_finding()
        channel(f"http://127.0.0.1:{listener.port}{SECRET_PATH}")
        notification = send_once()
    finally:
        listener.close()
    assert listener.hits == [SECRET_PATH]
    assert "Timeout" in notification.last_error and "SECRET" not in notification.last_error
    settings.GPUFINOPS_WEBHOOK_TIMEOUT = 3600
    assert outbound.timeout() == (outbound.MAX_TIMEOUT_SECONDS, outbound.MAX_TIMEOUT_SECONDS)


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/", "http://127.0.0.1:6379/",
                                 "http://[::1]:5432/", "http://localhost/", "ftp://example.com/x"])
def test_the_command_and_the_admin_refuse_internal_targets_when_saved(url, admin_client):
    from apps.inventory.models import Team

    team = Team.objects.create(name="research")
    with pytest.raises(CommandError, match="refused|http"):
        call_command("team_channel", "add", "research", "chat", "--url", url)
    response = admin_client.post("/admin/findings/teamchannel/add/",
                                 {"team": team.pk, "name": "chat", "enabled": "on", "url": url})
    assert response.status_code == 200 and b"errorlist" in response.content
