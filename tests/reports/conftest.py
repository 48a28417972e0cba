"""Ledgers for the report tests, written through the real write path (claim_bucket + write_bucket with
compute_bucket results), people (finance, a team lead, a member of no team) and the e-mails they receive.

The standard week is 2026-W47 (Monday 16 Nov 2026 to Monday 23 Nov, UTC), on cluster `prod`:

* node n1: 8 x H100 at 3.3333 USD per GPU-hour; node m1: 8 x A100 with no price (unpriced);
* pods per hour: vision holds 2 H100 (activity 0.5), nlp 1 H100 for 2222 s (0.25), research 3 H100 for 1234 s
  (0.1), data 1 A100 (unpriced: its hours count, its cost is unknown; 0.9).

Odd prices and partial hours make the cents interesting: the printed rows have to be apportioned.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group, User

from apps.accounts.selectors import FINANCE_GROUP
from apps.inventory.gpus import GpuNode
from apps.inventory.models import Cluster, Team
from apps.usage import services as ledger
from apps.usage.activity import SIGNALS
from apps.usage.ledger import BucketInputs, NodeFact, PodFact, SeriesFact, compute_bucket
from tests.harness.shared_rows import WORLD_FIXTURES

START = datetime(2026, 11, 16, tzinfo=UTC)  # Monday of 2026-W47
END = START + timedelta(days=7)
NOW = END + timedelta(hours=2)
H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-80GB"
PRICE = Decimal("3.3333")
N1 = NodeFact("n1", "h100-pool", GpuNode(H100, 8, "none", 7), 3600.0, False, PRICE)
M1 = NodeFact("m1", "a100-pool", GpuNode(A100, 8, "none", 7), 3600.0, False, None)


def series(ns: str, pod: str, uuid: str, value: float) -> SeriesFact:
    return SeriesFact(ns, pod, uuid, "", "", dict.fromkeys(SIGNALS, value))


def standard_pods(extra_nlp_gpus: int = 0) -> tuple[list[PodFact], list[SeriesFact]]:
    nlp_gpus = 1 + extra_nlp_gpus
    pods = [
        PodFact("u-vision", "cv", "train-0", "n1", "vision", {"nvidia.com/gpu": 2}, 3600.0, workload="Job/train"),
        PodFact("u-nlp", "text", "serve-0", "n1", "nlp", {"nvidia.com/gpu": nlp_gpus}, 2222.0,
                workload="Deployment/serve"),
        PodFact("u-research", "lab", "sweep-0", "n1", "research", {"nvidia.com/gpu": 3}, 1234.0,
                workload="Job/sweep"),
        PodFact("u-data", "etl", "embed-0", "m1", "data", {"nvidia.com/gpu": 1}, 3600.0, workload="Job/embed"),
    ]
    found = [series("cv", "train-0", "GPU-v1", 0.5), series("cv", "train-0", "GPU-v2", 0.5),
             series("lab", "sweep-0", "GPU-r1", 0.1), series("lab", "sweep-0", "GPU-r2", 0.1),
             series("lab", "sweep-0", "GPU-r3", 0.1), series("etl", "embed-0", "GPU-d1", 0.9)]
    found += [series("text", "serve-0", f"GPU-n{i}", 0.25) for i in range(nlp_gpus)]
    return pods, found


def write_hour(cluster: Cluster, hour: datetime, pods: list[PodFact], found: list[SeriesFact],
               nodes: Iterable[NodeFact] = (N1, M1), owner: str = "t") -> None:
    assert ledger.claim_bucket(cluster, hour, owner)
    result = compute_bucket(BucketInputs(hour, 3600, list(nodes), pods, found))
    ledger.write_bucket(cluster, hour, result, owner=owner, covered_until=hour + timedelta(hours=1))


def fill(cluster: Cluster, start: datetime, end: datetime,
         make: Callable[[datetime], tuple[list[PodFact], list[SeriesFact]]] | None = None) -> None:
    hour = start
    while hour < end:
        pods, found = (make or (lambda h: standard_pods()))(hour)
        write_hour(cluster, hour, pods, found)
        hour += timedelta(hours=1)


@pytest.fixture(autouse=True)
def keep_every_month(settings):
    """The ledgers here are dated (2026-11); the pod-row retention (GPUFINOPS_LEDGER_KEEP_MONTHS) counts back from
    the real clock, so it is off unless a test sets it."""
    settings.GPUFINOPS_LEDGER_KEEP_MONTHS = 0


@dataclass
class People:
    finance: User
    lead: User  # on team vision
    loner: User  # on no team
    staff: User


def make_teams() -> None:
    for name in ("vision", "nlp", "research", "data"):
        Team.objects.get_or_create(name=name)


def make_people() -> People:
    make_teams()
    finance = User.objects.create_user("fin", email="finance@example.com", password="x")
    finance.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    lead = User.objects.create_user("vlead", email="vision-lead@example.com", password="x")
    Team.objects.get(name="vision").members.add(lead)
    loner = User.objects.create_user("loner", email="loner@example.com", password="x")
    staff = User.objects.create_user("root", email="root@example.com", password="x", is_staff=True)
    return People(finance, lead, loner, staff)


@dataclass(frozen=True)
class Week:
    cluster: Cluster
    people: People


def build_week() -> Week:
    from django.test import override_settings

    with override_settings(GPUFINOPS_LEDGER_KEEP_MONTHS=0):  # built before the autouse keep_every_month applies
        people = make_people()
        prod = Cluster.objects.create(name="prod")
        fill(prod, START, END)
    return Week(prod, people)


# The standard week (168 buckets through the write path) is built once for the tests that run one after another
# with it (tests/harness/shared_rows.py); `prod` and `people` are its own in those tests.
WORLD_FIXTURES.add("standard_week")


@pytest.fixture
def standard_week(shared_rows) -> Week:
    return shared_rows.world("standard_week", build_week)


# The worlds that hold `prod` and `people` (each a fixture returning a `Week`): the standard week, and those of
# test modules (test_archive_api's two weeks).
WEEK_WORLDS = ["standard_week"]


def _in_week(request) -> Week | None:
    """The test's world, fetched afresh (a test may change the objects it is handed), when it uses one."""
    names = [name for name in WEEK_WORLDS if name in request.fixturenames]
    if not names:
        return None
    built: Week = request.getfixturevalue(names[0])
    p = built.people
    fresh = People(*(User.objects.get(pk=u.pk) for u in (p.finance, p.lead, p.loner, p.staff)))
    return Week(Cluster.objects.get(pk=built.cluster.pk), fresh)


@pytest.fixture
def teams(db) -> None:
    make_teams()


@pytest.fixture
def people(request, teams) -> People:
    week = _in_week(request)
    return week.people if week else make_people()


@pytest.fixture
def prod(request, db) -> Cluster:
    week = _in_week(request)
    return week.cluster if week else Cluster.objects.create(name="prod")


@pytest.fixture
def week(standard_week, request, db) -> Cluster:
    """The standard week, every hour final."""
    found = _in_week(request)
    assert found is not None
    return found.cluster


# ---- Reading what the SMTP server received ----


def text_part(message) -> str:
    """The plain-text part as the reader sees it (SMTP carries its lines with CRLF)."""
    return message.get_body(("plain",)).get_content().replace("\r\n", "\n")


def html_part(message) -> str:
    return message.get_body(("html",)).get_content()


def attachments(message) -> dict[str, bytes]:
    """Attachment name -> the bytes as received (base64 decoded)."""
    out = {}
    for part in message.iter_attachments():
        assert part["Content-Transfer-Encoding"] == "base64", part["Content-Transfer-Encoding"]
        out[part.get_filename()] = base64.b64decode(part.get_payload())
    return out


def csv_rows(data: bytes) -> list[dict]:
    return list(csv.DictReader(io.StringIO(data.decode("utf-8"), newline="")))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


MONEY = re.compile(r"([+-]?)\$([\d,]+\.\d{2})")


def money(text: str) -> Decimal:
    m = MONEY.search(text)
    assert m, text
    value = Decimal(m[2].replace(",", ""))
    return -value if m[1] == "-" else value


def table_rows(text: str) -> dict[str, list[str]]:
    """The BY TEAM block of the plain-text part: name -> its cells, cut at the header's (right-aligned) columns."""
    block = text.split("BY TEAM (sorted by cost)\n", 1)[1].split("\n\n", 1)[0]
    header, *lines = block.splitlines()
    spans = [(m.start(), m.end()) for m in re.finditer(r"\S+(?: \S+)*", header)]
    rows = {}
    for line in lines:
        if set(line.strip()) <= {"-"}:
            continue
        cells = re.split(r"\s{2,}", line[:spans[1][1]].strip())  # the name (never two spaces in one) and cost
        cells += [line[spans[i - 1][1]:end].strip() for i, (_, end) in enumerate(spans[:-1]) if i > 1]
        cells.append(line[spans[-1][0]:].strip())
        rows[cells[0]] = cells[1:]
    return rows


def by_rcpt(server) -> dict[str, list]:
    out: dict[str, list] = {}
    for m in server.messages:
        for r in m.rcpt_tos:
            out.setdefault(r, []).append(m.message)
    return out
