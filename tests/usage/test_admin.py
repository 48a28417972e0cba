"""The ledger's admin pages list every ledger table and let nobody add, change or delete a row."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

LEDGER = ["bucket", "podhour", "nodehour", "usagehour", "usageday", "capacityhour", "capacityday", "podobservation"]


@pytest.mark.django_db
@pytest.mark.parametrize("table", LEDGER)
def test_a_superuser_browses_but_cannot_edit_the_ledger(table):
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="x" * 20))
    assert client.get(f"/admin/usage/{table}/").status_code == 200
    assert client.get(f"/admin/usage/{table}/add/").status_code == 403
