from django.db import migrations, models


def encrypt_existing(apps, schema_editor):
    """Credentials stored in clear (and in URLs) move into the encrypted column."""
    from apps.common import secrets
    from apps.inventory.models import split_userinfo

    Cluster = apps.get_model("inventory", "Cluster")
    for cluster in Cluster.objects.all():
        url, userinfo = split_userinfo(cluster.prometheus_url)
        plain = userinfo or cluster.prometheus_auth
        cluster.prometheus_url = url
        cluster.prometheus_auth_encrypted = secrets.encrypt(plain)
        cluster.save(update_fields=["prometheus_url", "prometheus_auth_encrypted"])


class Migration(migrations.Migration):

    dependencies = [
        ("inventory", "0003_gpu_rules_one_home"),
    ]

    operations = [
        migrations.AddField(
            model_name="cluster",
            name="prometheus_auth_encrypted",
            field=models.TextField(blank=True, editable=False),
        ),
        migrations.AddField(
            model_name="cluster",
            name="prometheus_auth_file",
            field=models.CharField(blank=True, max_length=500),
        ),
        migrations.RunPython(encrypt_existing, migrations.RunPython.noop),
        migrations.RemoveField(
            model_name="cluster",
            name="prometheus_auth",
        ),
    ]
