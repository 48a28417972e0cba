"""docker-compose.yml cannot run here: keep it valid and make every command name a real entry point."""

from __future__ import annotations

import importlib

import yaml
from django.core.management import get_commands

from tests.foundation.helpers import REPO_ROOT

EXPECTED_SERVICES = {"postgres", "redis", "web", "worker", "beat"}


def load_compose() -> dict:
    return yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())


def as_argv(command) -> list[str]:
    return command.split() if isinstance(command, str) else [str(part) for part in command]


def assert_entry_point(service: str, argv: list[str]) -> None:
    if argv[:2] == ["python", "manage.py"]:
        assert argv[2] in get_commands(), f"{service}: no management command {argv[2]!r}"
    elif argv[0] == "celery":
        assert argv[1:3] == ["-A", "gpufinops"], service
        assert argv[3] in {"worker", "beat"}, service
        from gpufinops import celery_app

        assert celery_app.main == "gpufinops"
    elif argv[0] == "gunicorn":
        module_name, _, attribute = argv[1].partition(":")
        module = importlib.import_module(module_name)
        assert callable(getattr(module, attribute or "application")), service
    else:
        raise AssertionError(f"{service}: unknown entry point {argv!r}")


def test_it_parses_docker_compose_with_the_five_services():
    services = load_compose()["services"]
    assert set(services) >= EXPECTED_SERVICES
    assert services["web"]["command"][:2] == ["gunicorn", "gpufinops.wsgi"]
    assert as_argv(services["worker"]["command"])[:4] == ["celery", "-A", "gpufinops", "worker"]
    assert as_argv(services["beat"]["command"])[:4] == ["celery", "-A", "gpufinops", "beat"]


def test_it_names_a_real_entry_point_in_every_app_command():
    services = load_compose()["services"]
    app_services = {name: spec for name, spec in services.items() if "build" in spec}
    assert {"web", "worker", "beat"} <= set(app_services)
    for name, spec in app_services.items():
        assert "command" in spec, name
        assert_entry_point(name, as_argv(spec["command"]))
        env = spec["environment"]
        assert env["DATABASE_URL"].startswith("postgres://") and env["CELERY_BROKER_URL"].startswith("redis://")


def test_it_points_app_services_at_the_compose_postgres_and_redis():
    services = load_compose()["services"]
    env = services["web"]["environment"]
    assert "@postgres:5432/" in env["DATABASE_URL"] and "//redis:6379" in env["CELERY_BROKER_URL"]
    assert services["web"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_it_keeps_secrets_out_of_the_file_and_tls_on_by_default():
    text = (REPO_ROOT / "docker-compose.yml").read_text()
    services = load_compose()["services"]
    env = services["web"]["environment"]
    assert services["web"]["env_file"] == ".env"
    assert "gpufinops:gpufinops@" not in text and "POSTGRES_PASSWORD: gpufinops" not in text
    assert env["SECRET_KEY"].startswith("${SECRET_KEY:?") and env["GPUFINOPS_SECRETS_KEY"].startswith("${")
    for name, default in [("SECURE_SSL_REDIRECT", "1"), ("SESSION_COOKIE_SECURE", "1"), ("CSRF_COOKIE_SECURE", "1"),
                          ("SECURE_HSTS_SECONDS", "31536000")]:
        assert env[name] == f"${{{name}:-{default}}}", name
    example = (REPO_ROOT / ".env.example").read_text()
    for name in ("SECRET_KEY=", "GPUFINOPS_SECRETS_KEY=", "POSTGRES_PASSWORD="):
        assert f"\n{name}\n" in example, name  # present and empty: the operator fills them in
    assert ".env" in (REPO_ROOT / ".gitignore").read_text().split()
