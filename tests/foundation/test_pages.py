"""The base page, the overview's empty state, sign-in, static files and /healthz."""

from __future__ import annotations

from unittest import mock

import pytest
from django.db import OperationalError

from apps.inventory.models import Cluster


@pytest.mark.django_db
def test_it_serves_the_overview_with_an_empty_state(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("ana"))
    response = client.get("/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "No clusters yet" in body
    assert "manage.py add_cluster" in body and "make demo" in body
    for label, href in [("Capacity", "/capacity/"), ("Queues", "/queues/"), ("API docs", "/api/v1/docs/")]:
        assert f'href="{href}"' in body, label
    assert 'href="/admin/"' not in body  # Admin is linked only for those who can use it
    assert "/static/css/app.css" in body
    assert "cdn" not in body.lower()


@pytest.mark.django_db
def test_it_lists_clusters_to_staff_only_and_never_their_credentials(client, django_user_model):
    Cluster.objects.create(name="prod-a", prometheus_url="https://promuser:S3cretPromPass@prometheus:9090")
    assert Cluster.objects.get().prometheus_url == "https://prometheus:9090"  # the credential left the URL
    anonymous = client.get("/").content.decode()
    assert "prod-a" not in anonymous and "cluster" not in anonymous.lower()  # not even a count
    client.force_login(django_user_model.objects.create_user("ana", password="pw-123456789"))
    member = client.get("/").content.decode()
    assert "prod-a" not in member and "prometheus:9090" not in member and "No clusters yet" not in member
    client.force_login(django_user_model.objects.create_user("ops", password="pw-123456789", is_staff=True))
    staff = client.get("/").content.decode()
    assert "prod-a" in staff and "https://prometheus:9090" in staff
    assert "S3cretPromPass" not in staff and "promuser" not in staff


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/capacity/", "/queues/", "/accounts/login/"])
def test_it_serves_every_navigation_page(client, path, django_user_model):
    client.force_login(django_user_model.objects.create_user("ana", password="pw-123456789"))
    assert client.get(path).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/capacity/", "/queues/"])
def test_it_sends_anonymous_visitors_to_sign_in(client, path):
    response = client.get(path)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


@pytest.mark.django_db
def test_it_signs_in_with_a_session(client, django_user_model):
    django_user_model.objects.create_user("ana", password="pw-123456789")
    response = client.post("/accounts/login/", {"username": "ana", "password": "pw-123456789"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert "ana" in client.get("/").content.decode()


def test_it_finds_plotly_js_in_the_installed_package():
    from django.contrib.staticfiles import finders

    path = finders.find("js/plotly.min.js")
    assert path and path.endswith("plotly.min.js")


def test_it_collects_plotly_js_into_static_root(tmp_path, settings):
    from django.core.management import call_command

    settings.STATIC_ROOT = tmp_path / "static"
    call_command("collectstatic", interactive=False, verbosity=0)
    assert (tmp_path / "static" / "js" / "plotly.min.js").stat().st_size > 1_000_000
    assert (tmp_path / "static" / "css" / "app.css").is_file()


@pytest.mark.django_db
def test_it_reports_health_without_a_broker(client, django_user_model):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}  # anonymous probes learn the word, nothing else
    client.force_login(django_user_model.objects.create_user("ops", is_staff=True))
    assert client.get("/healthz").json() == {"database": "ok", "broker": "not configured", "status": "ok"}


@pytest.mark.django_db
def test_it_reports_a_broken_broker_as_degraded(client, django_user_model):
    from gpufinops.celery import app

    client.force_login(django_user_model.objects.create_user("ops", is_staff=True))
    saved = (app.conf.task_always_eager, app.conf.broker_url)
    app.conf.update(task_always_eager=False, broker_url="redis://127.0.0.1:1/0")
    try:
        response = client.get("/healthz")
    finally:
        app.conf.update(task_always_eager=saved[0], broker_url=saved[1])
    body = response.json()
    assert response.status_code == 200
    assert body["database"] == "ok" and body["status"] == "degraded"
    assert body["broker"].startswith("error: ")


@pytest.mark.django_db
def test_it_answers_503_when_the_database_is_down(client):
    from django.db.backends.base.base import BaseDatabaseWrapper

    with mock.patch.object(BaseDatabaseWrapper, "cursor", side_effect=OperationalError("connection refused")):
        response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"status": "degraded"}  # the error text is not for anonymous visitors


@pytest.mark.django_db
def test_staff_read_the_products_tables_in_the_admin_and_only_staff_see_the_link(client, django_user_model):
    """A staff user who is not a superuser (the demo's `demo`) reads clusters and the ledger in the admin, may
    change nothing, and never reads people or tokens; the Admin link is for staff only."""
    Cluster.objects.create(name="prod-a", prometheus_url="http://prometheus:9090")
    client.force_login(django_user_model.objects.create_user("ops", password="pw-123456789", is_staff=True))
    assert 'href="/admin/"' in client.get("/glossary/").content.decode()
    index = client.get("/admin/")
    assert index.status_code == 200 and "have permission" not in index.content.decode()
    assert "prod-a" in client.get("/admin/inventory/cluster/").content.decode()
    assert client.get("/admin/inventory/cluster/add/").status_code == 403
    assert client.get("/admin/auth/user/").status_code == 403
    client.force_login(django_user_model.objects.create_user("ana", password="pw-123456789"))
    assert 'href="/admin/"' not in client.get("/glossary/").content.decode()


@pytest.mark.django_db
def test_the_glossary_names_every_finding_term_and_dates_are_typed_iso(client, django_user_model):
    body = client.get("/glossary/").content.decode()
    for term in ("infra-loss", "straggler", "unhealthy-gpu", "finding", "period", "change"):
        assert f'id="{term}"' in body, term
    Cluster.objects.create(name="prod-a", prometheus_url="http://prometheus:9090")
    client.force_login(django_user_model.objects.create_user("ops", password="pw-123456789", is_staff=True))
    page = client.get("/workloads/").content.decode()
    assert 'type="date"' not in page and 'placeholder="YYYY-MM-DD"' in page
