"""Admin for the inventory: clusters, node groups, nodes, teams, namespace mapping, price card."""

from __future__ import annotations

from django import forms
from django.contrib import admin

from apps.inventory.models import Cluster, GpuPrice, NamespaceTeam, Node, NodeGroup, Team, prometheus_url_problem


class ClusterForm(forms.ModelForm):
    """The Prometheus credential is write-only: never rendered, stored encrypted, blank keeps the stored one."""

    prometheus_url = forms.URLField(max_length=500, required=False, assume_scheme="https",
                                    help_text="Only scheme://host:port is kept in view: credentials in the URL "
                                              "(user:password@) move to the encrypted credential and its path is "
                                              "stored encrypted (a new URL replaces it). A query is refused.")
    prometheus_auth = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text='Bearer token or "user:password"; stored encrypted; leave blank to keep the stored value.',
    )
    clear_prometheus_auth = forms.BooleanField(required=False, help_text="Remove the stored credential.")

    class Meta:
        model = Cluster
        fields = [
            "name", "source", "prometheus_url", "prometheus_verify_tls", "prometheus_auth_file", "kubeconfig_path",
            "kube_context", "in_cluster", "metric_names",
        ]

    def clean_prometheus_url(self) -> str:
        url: str = self.cleaned_data.get("prometheus_url") or ""
        problem = prometheus_url_problem(url)
        if problem:
            raise forms.ValidationError(problem)
        return url

    def save(self, commit: bool = True) -> Cluster:
        cluster = super().save(commit=False)
        if "prometheus_url" in self.changed_data:
            cluster.set_prometheus_url(self.cleaned_data.get("prometheus_url") or "")
        if self.cleaned_data.get("clear_prometheus_auth"):
            cluster.prometheus_auth = ""
        elif self.cleaned_data.get("prometheus_auth"):
            cluster.prometheus_auth = self.cleaned_data["prometheus_auth"]
        if commit:
            cluster.save()
        return cluster


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    form = ClusterForm
    list_display = ["name", "source", "prometheus", "credential", "in_cluster", "kube_context", "created_at"]
    list_filter = ["source", "in_cluster"]
    search_fields = ["name"]

    @admin.display(description="Prometheus")
    def prometheus(self, cluster: Cluster) -> str:
        return cluster.prometheus_shown
    readonly_fields = ["created_at"]

    @admin.display(boolean=True, description="credential")
    def credential(self, cluster: Cluster) -> bool:
        return cluster.has_prometheus_auth


@admin.register(NodeGroup)
class NodeGroupAdmin(admin.ModelAdmin):
    list_display = ["name", "cluster"]
    list_filter = ["cluster"]
    search_fields = ["name"]


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    """Nodes are observed from Kubernetes by the collectors: shown, not edited."""

    list_display = [
        "name", "cluster", "node_group", "gpu_model", "physical_gpus", "sharing", "ready", "gone", "last_seen",
    ]
    list_filter = ["cluster", "gpu_model", "sharing", "ready", "unschedulable", "gone"]
    search_fields = ["name", "provider_id"]
    list_select_related = ["cluster", "node_group"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class NamespaceTeamInline(admin.TabularInline):
    model = NamespaceTeam
    extra = 0


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "display_name"]
    search_fields = ["name", "display_name"]
    filter_horizontal = ["members"]
    inlines = [NamespaceTeamInline]


@admin.register(NamespaceTeam)
class NamespaceTeamAdmin(admin.ModelAdmin):
    list_display = ["namespace", "team", "cluster", "enforced"]
    list_filter = ["cluster", "team", "enforced"]
    search_fields = ["namespace", "team__name"]


@admin.register(GpuPrice)
class GpuPriceAdmin(admin.ModelAdmin):
    list_display = ["gpu_model", "usd_per_gpu_hour", "cluster", "effective_from"]
    list_filter = ["gpu_model", "cluster"]
    date_hierarchy = "effective_from"
