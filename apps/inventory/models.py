"""The nouns every other app points at: clusters, node groups, nodes, teams, namespace mappings, prices."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit, urlunsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from apps.common import secrets
from apps.common.redaction import hide, redact_url, scrub


class Cluster(models.Model):
    """A Kubernetes cluster with its Prometheus, as gpufinops reaches them."""

    class Source(models.TextChoices):
        KUBERNETES = "kubernetes", "Kubernetes API + Prometheus"
        SIMULATOR = "simulator", "In-process simulator (demo only)"

    name = models.SlugField(max_length=100, unique=True)
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.KUBERNETES)
    # Only scheme://host[:port], what people may see: on save `user:password@` moves into the encrypted credential
    # and the path (which may be a key: /api/v1/<token>/prom) into prometheus_path_encrypted. A query or fragment
    # is refused (a token belongs in the credential). The collector reads `prometheus_endpoint`.
    prometheus_url = models.URLField(max_length=500, blank=True)
    prometheus_path_encrypted = models.TextField(blank=True, editable=False)
    # Bearer token or "user:password" for basic auth, encrypted (apps/common/secrets.py); read it through
    # `prometheus_auth`. Or a file holding it (a mounted Kubernetes Secret), read at collection time.
    prometheus_auth_encrypted = models.TextField(blank=True, editable=False)
    prometheus_auth_file = models.CharField(max_length=500, blank=True)
    prometheus_verify_tls = models.BooleanField(default=True)
    kubeconfig_path = models.CharField(max_length=500, blank=True)
    kube_context = models.CharField(max_length=200, blank=True)
    in_cluster = models.BooleanField(default=False)
    # Per-cluster DCGM metric names, e.g. {"sm_active": "DCGM_FI_PROF_SM_UTIL_RATIO"} (DCGM 4.6 renames).
    metric_names = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        self.move_url_secrets()
        super().save(*args, **kwargs)

    def move_url_secrets(self) -> None:
        """Keep only scheme://host:port in `prometheus_url`: userinfo to the credential, the path encrypted.
        A URL with a query or fragment is refused (ValidationError) before anything is stored."""
        problem = prometheus_url_problem(self.prometheus_url)
        if problem:
            raise ValidationError({"prometheus_url": problem})
        url, userinfo = split_userinfo(self.prometheus_url)
        parts = urlsplit(url)
        if userinfo:
            self.prometheus_auth = userinfo
        if parts.path.strip("/"):
            self.prometheus_path_encrypted = secrets.encrypt(parts.path.rstrip("/"))
        self.prometheus_url = urlunsplit((parts.scheme, parts.netloc, "", "", "")) if url else ""

    def set_prometheus_url(self, url: str) -> None:
        """A new Prometheus URL, replacing the stored path too (no path: none)."""
        self.prometheus_path_encrypted = ""
        self.prometheus_url = url
        self.move_url_secrets()

    @property
    def prometheus_endpoint(self) -> str:
        """The full URL the collector calls (with the decrypted path); never printed: use `prometheus_shown`."""
        path = secrets.decrypt(self.prometheus_path_encrypted)
        return self.prometheus_url.rstrip("/") + path if path else self.prometheus_url

    def scrub(self, text: str) -> str:
        """An error text about this cluster fit to log or store: no part of its Prometheus URL beyond the host, and
        not its credential (a server may echo the Authorization header back in an error)."""
        try:
            endpoint, credential = self.prometheus_endpoint, self.prometheus_auth
        except (secrets.SecretError, OSError):
            endpoint, credential = "", ""
        return hide(scrub(text, endpoint, self.prometheus_url), credential)

    @property
    def prometheus_shown(self) -> str:
        """What pages, the admin, the API and logs print: scheme://host:port."""
        return redact_url(self.prometheus_url)

    @property
    def prometheus_auth(self) -> str:
        """The credential in clear, for the collector only: from the file when one is named, else decrypted."""
        if self.prometheus_auth_file:
            with open(self.prometheus_auth_file, encoding="utf-8") as fh:
                return fh.read().strip()
        return secrets.decrypt(self.prometheus_auth_encrypted)

    @prometheus_auth.setter
    def prometheus_auth(self, value: str) -> None:
        self.prometheus_auth_encrypted = secrets.encrypt(value)

    @property
    def has_prometheus_auth(self) -> bool:
        return bool(self.prometheus_auth_encrypted or self.prometheus_auth_file)

def prometheus_url_problem(url: str) -> str | None:
    """Why a Prometheus URL cannot be stored (None when it can). Says nothing of the URL's secret parts."""
    try:
        parts = urlsplit(url or "")
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError:
        return "The Prometheus URL cannot be parsed."
    if parts.query or parts.fragment:
        return ("A Prometheus URL with a query (?...) or fragment (#...) is refused: a token in the URL would be "
                "printed. Put it in the credential (bearer token or user:password) or a credential file instead.")
    return None


def split_userinfo(url: str) -> tuple[str, str]:
    """`https://user:pass@host/x` -> (`https://host/x`, `user:pass`); URLs keep no credentials."""
    parts = urlsplit(url or "")
    if not parts.username and not parts.password:
        return url, ""
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
    userinfo = unquote(parts.username or "") + (":" + unquote(parts.password) if parts.password is not None else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)), userinfo


class NodeGroup(models.Model):
    """Nodes grouped by the first node-pool label present, else by GPU model (ledger.md)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="node_groups")
    name = models.CharField(max_length=253)

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="uniq_nodegroup")]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.name}"


class Node(models.Model):
    """A GPU node as last observed."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253)
    node_group = models.ForeignKey(NodeGroup, on_delete=models.CASCADE, related_name="nodes")
    gpu_model = models.CharField(max_length=200, blank=True)
    physical_gpus = models.PositiveIntegerField(default=0)
    sharing = models.CharField(max_length=20, default="none")  # none|time-slicing|mps|mig-mixed|mig-single|dra|hami
    labels = models.JSONField(default=dict, blank=True)
    capacity = models.JSONField(default=dict, blank=True)
    allocatable = models.JSONField(default=dict, blank=True)
    ready = models.BooleanField(default=True)
    unschedulable = models.BooleanField(default=False)
    created = models.DateTimeField(null=True, blank=True)
    # spec.providerID as last observed; the bill's ResourceId is matched against it (apps/billing/matching.py).
    provider_id = models.CharField(max_length=1000, blank=True, default="")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    gone = models.BooleanField(default=False)
    # GPUs handed out by DRA claims and HAMi fractions, as last observed (empty on device-plugin nodes).
    # dra_devices: the GPU devices its GPU drivers publish ({driver, pool, name, type, uuid, parent_uuid, profile,
    # product_name, memory_bytes}); dra_held: names of those some allocated claim held.
    dra_devices = models.JSONField(default=list, blank=True)
    dra_held = models.JSONField(default=list, blank=True)
    # hami_gpus: the GPUs HAMi registered ({uuid, count, memory_mib, cores, type, healthy}); hami_shares: GPU UUID
    # -> its running tenants' shares added up (past 1: oversubscribed).
    hami_gpus = models.JSONField(default=list, blank=True)
    hami_shares = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="uniq_node")]

    def __str__(self) -> str:
        return self.name


def validate_team_name(value: str) -> None:
    """Team names are Kubernetes label values (labels name teams): at most 63 characters, alphanumerics,
    `-`, `_`, `.`, beginning and ending with an alphanumeric."""
    from apps.inventory.teams import is_valid_team_name  # teams.py reads these models: imported at call time

    if not is_valid_team_name(value):
        raise ValidationError("A team name is a Kubernetes label value: up to 63 letters, digits, '-', '_', '.'.")


class Team(models.Model):
    """Who pays. Names are what labels carry; `unassigned` collects hours without a team."""

    name = models.CharField(max_length=100, unique=True, validators=[validate_team_name])
    display_name = models.CharField(max_length=200, blank=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="teams")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class NamespaceTeam(models.Model):
    """Explicit namespace-to-team mapping (ledger.md "Teams").

    A mapping is *enforced* unless the operator marks the namespace self-labelling (`enforced=False`): it wins
    over pod and namespace labels, because tenants write labels. In a self-labelling namespace the labels
    decide and the mapping applies only to what carries none.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, null=True, blank=True)
    namespace = models.CharField(max_length=253)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="namespaces")
    enforced = models.BooleanField(
        default=True,
        help_text="Wins over pod and namespace labels (a label naming another team is reported, not obeyed). "
                  "Untick to make the namespace self-labelling: its tenants' team labels decide.",
    )

    class Meta:
        ordering = ["namespace"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "namespace"], name="uniq_ns_team"),
        ]

    def __str__(self) -> str:
        return f"{self.namespace} -> {self.team.name}{'' if self.enforced else ' (self-labelling)'}"


class GpuPrice(models.Model):
    """Price card: USD per physical GPU-hour for a GPU model, optionally per cluster, effective-dated."""

    gpu_model = models.CharField(max_length=200)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, null=True, blank=True)
    usd_per_gpu_hour = models.DecimalField(max_digits=12, decimal_places=4)
    effective_from = models.DateField()

    class Meta:
        ordering = ["gpu_model", "-effective_from"]
        constraints = [
            models.UniqueConstraint(fields=["gpu_model", "cluster", "effective_from"], name="uniq_price"),
        ]

    def __str__(self) -> str:
        scope = self.cluster.name if self.cluster is not None else "all clusters"
        return f"{self.gpu_model} {self.usd_per_gpu_hour} USD/h from {self.effective_from} ({scope})"


class ClusterTeam(models.Model):
    """A team seen in a cluster (ledger hours, pending work or a local queue): the one fact the visibility
    rule reads. A team member sees the clusters their teams appear in; nothing else of a cluster."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="team_presence")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="cluster_presence")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()

    class Meta:
        ordering = ["cluster", "team"]
        constraints = [models.UniqueConstraint(fields=["cluster", "team"], name="uniq_cluster_team")]

    def __str__(self) -> str:
        return f"{self.team.name} in {self.cluster.name}"
