"""What must hold in every overlay's rendered manifests (deploy-and-operate.md §5.3 point 5, docs/deploy.md)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from deploy import render as renderer
from tests.deploy.conftest import OVERLAYS, REPO, objects_of, one, pod_spec, workloads
from tests.harness import cache

READ_VERBS = {"get", "list", "watch"}
COLLECTOR_SA = "gpufinops-collector"
SECRET_KEYS = {"SECRET_KEY", "GPUFINOPS_SECRETS_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL", "EMAIL_URL",
               "GPUFINOPS_METRICS_TOKEN"}


def each_overlay():
    return pytest.mark.parametrize("overlay", sorted(OVERLAYS))


def containers(obj, *, init: bool = True):
    spec = pod_spec(obj)
    return [*(spec.get("initContainers") or [] if init else []), *spec["containers"]]


@each_overlay()
def test_cluster_role_is_read_only(overlay, rendered):
    roles = objects_of(rendered[overlay], "ClusterRole") + objects_of(rendered[overlay], "Role")
    assert [r["metadata"]["name"] for r in roles] == ["gpufinops-collector"]
    for rule in roles[0]["rules"]:
        assert set(rule["verbs"]) <= READ_VERBS, rule
        assert "nonResourceURLs" not in rule and "resourceNames" not in rule
        assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"], rule
        for resource in rule["resources"]:
            assert resource != "secrets" and not resource.endswith("/proxy") and resource not in ("pods/log",
                                                                                                     "pods/exec")
            assert "*" not in resource


@each_overlay()
def test_only_the_worker_holds_an_api_token(overlay, rendered):
    objects = rendered[overlay]
    (binding,) = objects_of(objects, "ClusterRoleBinding")
    assert not objects_of(objects, "RoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": "gpufinops-collector"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": COLLECTOR_SA, "namespace": "gpufinops"}]
    accounts = {sa["metadata"]["name"]: sa for sa in objects_of(objects, "ServiceAccount")}
    assert set(accounts) == {"gpufinops", COLLECTOR_SA}
    assert accounts["gpufinops"]["automountServiceAccountToken"] is False
    for obj in workloads(objects):
        spec = pod_spec(obj)
        name = obj["metadata"]["name"]
        if name == "gpufinops-worker":
            assert spec["serviceAccountName"] == COLLECTOR_SA
        else:
            assert spec["serviceAccountName"] == "gpufinops", name
            assert spec["automountServiceAccountToken"] is False, name


@each_overlay()
def test_containers_have_resources_probes_and_a_locked_down_security_context(overlay, rendered):
    for obj in workloads(rendered[overlay]):
        name = obj["metadata"]["name"]
        pod = pod_spec(obj)
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert isinstance(pod["securityContext"]["runAsUser"], int) and pod["securityContext"]["runAsUser"] > 0
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in containers(obj):
            where = f"{name}/{c['name']}"
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True, where
            assert sc["allowPrivilegeEscalation"] is False, where
            assert sc["capabilities"] == {"drop": ["ALL"]}, where
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]), where
            assert "memory" in c["resources"]["limits"], where
            assert "/tmp" in {m["mountPath"] for m in c.get("volumeMounts", [])}, where
        if obj["kind"] == "Deployment" and name != "gpufinops-beat":
            for c in containers(obj, init=False):
                assert "livenessProbe" in c and "readinessProbe" in c, f"{name}/{c['name']}"


@each_overlay()
def test_every_writable_path_is_a_mounted_volume(overlay, rendered):
    """The root filesystem is read-only: whatever a process writes must be under an emptyDir mount."""
    for obj in workloads(rendered[overlay]):
        pod = pod_spec(obj)
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for c in containers(obj):
            mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
            for m in mounts.values():
                assert "emptyDir" in volumes[m["name"]], m
            written = []
            for arg in c.get("command", []) + c.get("args", []):
                for flag in ("--worker-tmp-dir=", "--schedule="):
                    if arg.startswith(flag):
                        written.append(arg.split("=", 1)[1])
            for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                command = (c.get(probe) or {}).get("exec", {}).get("command", [])
                written += [a for a in command if a.startswith("/")]
            for path in written:
                assert any(path == mp or path.startswith(mp.rstrip("/") + "/") for mp in mounts), (c["name"], path)


@each_overlay()
def test_exactly_one_beat_replaced_with_recreate(overlay, rendered):
    beat = one(rendered[overlay], "Deployment", "gpufinops-beat")
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"] == {"type": "Recreate"}
    assert not [p for p in objects_of(rendered[overlay], "PodDisruptionBudget")
                if p["spec"]["selector"]["matchLabels"].get("app.kubernetes.io/component") == "beat"]


@each_overlay()
def test_migration_job_is_named_after_the_image_tag_and_every_deployment_waits_for_it(overlay, rendered):
    objects = rendered[overlay]
    (job,) = objects_of(objects, "Job")
    (image,) = {c["image"] for c in pod_spec(job)["containers"]}
    tag = image.rsplit(":", 1)[1]
    assert job["metadata"]["name"] == f"gpufinops-migrate-{renderer.job_suffix(tag)}"
    assert pod_spec(job)["restartPolicy"] == "Never"
    assert pod_spec(job)["containers"][0]["command"] == ["python", "manage.py", "migrate", "--noinput"]
    for k in ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
        assert k in job["spec"], k
    for dep in objects_of(objects, "Deployment"):
        init = [c for c in pod_spec(dep).get("initContainers", []) if c["name"] == "wait-for-migrations"]
        assert len(init) == 1, dep["metadata"]["name"]
        assert "migrate --check" in " ".join(init[0]["command"])
        assert init[0]["image"] == image


@each_overlay()
def test_selectors_match_and_ports_are_named_consistently(overlay, rendered):
    objects = rendered[overlay]
    deployments = objects_of(objects, "Deployment")
    for dep in deployments:
        selector = dep["spec"]["selector"]["matchLabels"]
        assert set(selector) == {"app.kubernetes.io/name", "app.kubernetes.io/component"}  # immutable: minimal
        assert selector.items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    for pdb in objects_of(objects, "PodDisruptionBudget"):
        sel = pdb["spec"]["selector"]["matchLabels"].items()
        assert [d for d in deployments if sel <= d["spec"]["template"]["metadata"]["labels"].items()], pdb
    (service,) = objects_of(objects, "Service")
    web = one(objects, "Deployment", "gpufinops-web")
    assert service["spec"]["selector"].items() <= web["spec"]["template"]["metadata"]["labels"].items()
    container_ports = {p["name"] for c in pod_spec(web)["containers"] for p in c.get("ports", [])}
    for port in service["spec"]["ports"]:
        assert port["targetPort"] in container_ports
    for monitor in objects_of(objects, "ServiceMonitor"):
        assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
        for endpoint in monitor["spec"]["endpoints"]:
            assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
            assert endpoint["path"] == "/metrics"
            assert endpoint["authorization"]["credentials"] == {"name": "gpufinops-metrics", "key": "token"}


@each_overlay()
def test_secrets_come_from_secrets_and_never_from_the_config_map(overlay, rendered):
    objects = rendered[overlay]
    (config,) = objects_of(objects, "ConfigMap")
    assert not SECRET_KEYS & set(config["data"])
    assert not objects_of(objects, "Secret"), "secrets are created by the operator, never shipped"
    example = {s["metadata"]["name"]: set(s["stringData"])
               for s in yaml.safe_load_all((REPO / "deploy/k8s/secret.example.yaml").read_text())}
    for obj in workloads(objects):
        for c in containers(obj):
            env = {e["name"]: e for e in c.get("env", [])}
            for key in ("SECRET_KEY", "GPUFINOPS_SECRETS_KEY", "DATABASE_URL", "CELERY_BROKER_URL"):
                assert "secretKeyRef" in env[key]["valueFrom"], (c["name"], key)
            for e in env.values():
                ref = (e.get("valueFrom") or {}).get("secretKeyRef")
                if ref:
                    assert ref["key"] in example.get(ref["name"], set()), ref
                assert "value" not in e or e["name"] not in SECRET_KEYS


@each_overlay()
def test_web_probes_pass_host_validation(overlay, rendered):
    """Kubelet probes send Host: <pod IP>:<port>; the pod's IP must be an allowed host (settings read POD_IP),
    or a probe must name an allowed host itself."""
    objects = rendered[overlay]
    (config,) = objects_of(objects, "ConfigMap")
    allowed = set(config["data"]["ALLOWED_HOSTS"].split(","))
    web = one(objects, "Deployment", "gpufinops-web")
    (container,) = pod_spec(web)["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert get["path"] in ("/healthz", "/livez")
        for header in get.get("httpHeaders", []):
            if header["name"].lower() == "host":
                assert header["value"] in allowed


def test_settings_allow_the_pod_ip_so_probes_get_200(tmp_path):
    """The production settings with a strict ALLOWED_HOSTS answer a probe addressed to the pod IP; another
    unknown host still gets 400."""
    script = (
        "import django; django.setup()\n"
        "from django.core.management import call_command\n"
        "call_command('migrate', verbosity=0)\n"
        "from django.test import Client\n"
        "c = Client()\n"
        "print(c.get('/healthz', HTTP_HOST='10.1.2.3:8000').status_code,"
        " c.get('/livez', HTTP_HOST='10.1.2.3:8000').status_code,"
        " c.get('/healthz', HTTP_HOST='evil.example:8000').status_code)\n"
    )
    migrated = cache.migrated_sqlite_entry()
    if migrated is not None and migrated.exists():  # these migrations, already applied: `migrate` only confirms
        cache.copy_sqlite(migrated, tmp_path / "gpufinops.sqlite3")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(DJANGO_SETTINGS_MODULE="gpufinops.settings", DEBUG="0", SECRET_KEY="s" * 64,
               ALLOWED_HOSTS="gpufinops.example.com", POD_IP="10.1.2.3", GPUFINOPS_VAR_DIR=str(tmp_path),
               STATIC_ROOT=str(tmp_path / "static"), SECURE_SSL_REDIRECT="1", LOG_FORMAT="json",
               PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["200", "200", "400"]


def test_overlay_directories_hold_only_what_their_kustomizations_use():
    for path in OVERLAYS.values():
        spec = yaml.safe_load((path / "kustomization.yaml").read_text())
        used = {*(spec.get("resources") or []), *(spec.get("patchesStrategicMerge") or [])}
        files = {p.name for p in path.iterdir() if p.suffix == ".yaml" and p.name != "kustomization.yaml"}
        assert files <= used, f"{path}: unused {files - used}"


def test_dockerfile_builds_for_the_security_context():
    """The image runs as the non-root UID the manifests ask for, collects static files at build time and keeps
    nothing writable outside the mounted volumes."""
    text = (REPO / "Dockerfile").read_text()
    uid = re.search(r"^USER (\d+)(?::\d+)?$", text, re.M)
    assert uid, "USER must be numeric (runAsNonRoot can only verify a numeric UID)"
    web = one(renderer.render(OVERLAYS["production"]), "Deployment", "gpufinops-web")
    assert int(uid.group(1)) == pod_spec(web)["securityContext"]["runAsUser"]
    assert "collectstatic" in text
    assert "PYTHONDONTWRITEBYTECODE=1" in text
    assert Path(REPO / ".dockerignore").is_file()


def test_the_image_leaves_the_development_tools_out():
    """devtools/ (simulator, demo) is not in the build context, so not compiled into the image, and collectstatic's
    DEBUG=1 does not install it."""
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {"devtools", "tests", "bench"} <= set(ignored)
    build = next(line for line in (REPO / "Dockerfile").read_text().splitlines() if "compileall" in line)
    assert "devtools" not in build
    assert "GPUFINOPS_DEVTOOLS=0" in (REPO / "Dockerfile").read_text()
