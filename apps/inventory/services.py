"""Writes of the inventory: observed nodes, teams, prices. The GPU rules they apply live in `gpus.py`."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from apps.common.snapshots import field_values, upsert_observed
from apps.inventory import gpus
from apps.inventory.gpus.dra import DraDevice
from apps.inventory.gpus.hami import RegisteredGpu
from apps.inventory.handout import hand_out
from apps.inventory.models import Cluster, ClusterTeam, GpuPrice, NamespaceTeam, Node, NodeGroup, Team
from apps.inventory.observations import ClusterSnapshot, NodeInfo
from apps.inventory.teams import is_valid_team_name

NODE_FIELDS = ["node_group", "gpu_model", "physical_gpus", "sharing", "labels", "capacity", "allocatable", "ready",
               "unschedulable", "created", "provider_id", "last_seen", "gone", "dra_devices", "dra_held", "hami_gpus",
               "hami_shares"]


def _dra_device(d: DraDevice) -> dict[str, object]:
    return {"driver": d.driver, "pool": d.pool, "name": d.name, "type": d.type, "uuid": d.uuid,
            "parent_uuid": d.parent_uuid, "profile": d.profile, "product_name": d.product_name,
            "memory_bytes": d.memory_bytes}


def _hami_gpu(g: RegisteredGpu) -> dict[str, object]:
    return {"uuid": g.uuid, "count": g.count, "memory_mib": g.memory_mib, "cores": g.cores, "type": g.type,
            "healthy": g.healthy}


@transaction.atomic
def nodes_sync(
    cluster: Cluster, nodes: Iterable[NodeInfo], seen_at: datetime, *, snap: ClusterSnapshot | None = None
) -> list[Node]:
    """Upsert the nodes of one observation; nodes not in it are marked gone (kept for history). With the
    snapshot they came in, a DRA node's GPUs are its ResourceSlices' and a HAMi node's its register's."""
    existing = {n.name: n for n in Node.objects.filter(cluster=cluster)}
    groups = {g.name: g for g in NodeGroup.objects.filter(cluster=cluster)}
    hand = hand_out(snap) if snap is not None else None
    dra = snap.dra if snap is not None else None
    seen: list[Node] = []
    compared = [f for f in NODE_FIELDS if f != "last_seen"]
    to_write: list[Node] = []
    unchanged: list[int] = []
    for info in nodes:
        cls = hand.gpus[info.name] if hand is not None and info.name in hand.gpus else gpus.classify_node(
            info.labels, info.capacity)
        gname = gpus.node_group(info.labels, cls.gpu_model, settings.GPUFINOPS_NODE_GROUP_LABELS)
        if gname not in groups:
            # get_or_create: safe even where the caller holds no cluster lock (ingest takes one).
            groups[gname] = NodeGroup.objects.get_or_create(cluster=cluster, name=gname)[0]
        node = existing.get(info.name)
        before = None
        if node is None:
            node = Node(cluster=cluster, name=info.name, first_seen=seen_at)
        else:
            before = field_values(node, compared)
        node.node_group = groups[gname]
        node.gpu_model = cls.gpu_model
        node.physical_gpus = cls.physical_gpus
        node.sharing = cls.sharing
        node.labels = info.labels
        node.capacity = info.capacity
        node.allocatable = info.allocatable
        node.ready = info.ready
        node.unschedulable = info.unschedulable
        node.created = info.created
        node.provider_id = info.provider_id
        node.last_seen = seen_at
        node.gone = False
        dra_node = dra.inventory.nodes.get(info.name) if dra is not None else None
        node.dra_devices = [_dra_device(d) for d in dra_node.devices] if dra_node is not None else []
        node.dra_held = sorted(dra.held.get(info.name, ())) if dra is not None else []
        register = hand.registers.get(info.name) if hand is not None else None
        node.hami_gpus = [_hami_gpu(g) for g in register.gpus] if register is not None else []
        node.hami_shares = dict(hand.hami_shares.get(info.name, {})) if hand is not None else {}
        seen.append(node)
        if before is not None and field_values(node, compared) == before:
            unchanged.append(node.pk)  # seen again as it was: only its last_seen moves
        else:
            to_write.append(node)
    # One upsert for new and changed nodes (one UPDATE per node, then Django's bulk_update and its CASE
    # expressions, were most of an observation's time on a 1,250-node cluster), one UPDATE of last_seen for the
    # nodes seen again unchanged. first_seen is not updated.
    upsert_observed(Node, to_write, unchanged, unique_fields=["cluster", "name"], update_fields=NODE_FIELDS,
                    seen_field="last_seen", seen_at=seen_at)
    names = {n.name for n in seen}
    Node.objects.filter(cluster=cluster, gone=False).exclude(name__in=names).update(gone=True)
    return seen


def record_teams(cluster: Cluster, names: Iterable[str], seen_at: datetime) -> None:
    """Teams seen in `cluster` at `seen_at`: their Team rows exist and their presence is recorded.

    Teams are named by labels, so a team can have hours before anyone created its row. Presence only
    grows (`first_seen` kept, `last_seen` the latest), so re-recording an old hour changes nothing.
    """
    names = sorted(set(names))
    if not names:
        return
    Team.objects.bulk_create([Team(name=n) for n in names], ignore_conflicts=True)
    teams = dict(Team.objects.filter(name__in=names).values_list("name", "id"))
    present = {p.team_id: p for p in ClusterTeam.objects.filter(cluster=cluster, team_id__in=teams.values())}
    new, changed = [], []
    for team_id in teams.values():
        row = present.get(team_id)
        if row is None:
            new.append(ClusterTeam(cluster=cluster, team_id=team_id, first_seen=seen_at, last_seen=seen_at))
        elif seen_at > row.last_seen or seen_at < row.first_seen:
            row.first_seen, row.last_seen = min(row.first_seen, seen_at), max(row.last_seen, seen_at)
            changed.append(row)
    ClusterTeam.objects.bulk_create(new, ignore_conflicts=True)
    ClusterTeam.objects.bulk_update(changed, ["first_seen", "last_seen"])


def set_price(gpu_model: str, usd: Decimal, effective_from: date, cluster: Cluster | None = None) -> GpuPrice:
    price, _ = GpuPrice.objects.update_or_create(
        gpu_model=gpu_model, cluster=cluster, effective_from=effective_from,
        defaults={"usd_per_gpu_hour": usd},
    )
    return price


def map_namespace(namespace: str, team_name: str, *, cluster: Cluster | None = None, enforced: bool = True,
                  create_team: bool = False) -> NamespaceTeam:
    """Map `namespace` (in `cluster`, or in every cluster) to a team. Enforced (the default) wins over labels;
    `enforced=False` makes the namespace self-labelling (labels decide, the mapping covers what has none).

    Raises ValidationError for a team name that is not a valid label value, or an unknown team without
    `create_team`.
    """
    if not is_valid_team_name(team_name):
        raise ValidationError({"team": [f"{team_name[:80]!r} is not a valid team name (a Kubernetes label value)."]})
    if not namespace or len(namespace) > 253:
        raise ValidationError({"namespace": ["A namespace name is 1 to 253 characters."]})
    team = Team.objects.filter(name=team_name).first()
    if team is None:
        if not create_team:
            raise ValidationError({"team": [f"No team named {team_name!r} (use --create to create it)."]})
        team = Team.objects.create(name=team_name)
    mapping, _ = NamespaceTeam.objects.update_or_create(
        cluster=cluster, namespace=namespace, defaults={"team": team, "enforced": enforced}
    )
    return mapping
