from urllib.parse import urlsplit, urlunsplit

from django.db import migrations, models


def move_paths(apps, schema_editor):
    """A stored Prometheus URL keeps scheme://host:port; its path (and a query, which never worked) is encrypted."""
    from apps.common import secrets

    Cluster = apps.get_model("inventory", "Cluster")
    for cluster in Cluster.objects.exclude(prometheus_url=""):
        parts = urlsplit(cluster.prometheus_url)
        tail = parts.path.rstrip("/") + (f"?{parts.query}" if parts.query else "")
        if not tail.strip("/"):
            continue
        cluster.prometheus_url = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
        cluster.prometheus_path_encrypted = secrets.encrypt(tail)
        cluster.save(update_fields=["prometheus_url", "prometheus_path_encrypted"])


class Migration(migrations.Migration):

    dependencies = [
        ("inventory", "0005_team_name_is_a_label_value"),
    ]

    operations = [
        migrations.AddField(
            model_name="cluster",
            name="prometheus_path_encrypted",
            field=models.TextField(blank=True, editable=False),
        ),
        migrations.RunPython(move_paths, migrations.RunPython.noop),
    ]
