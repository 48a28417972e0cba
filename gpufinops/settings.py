"""gpufinops settings: everything comes from the environment (docs: README "Configuration")."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import dj_database_url

from apps.common.constants import DEV_SECRET_KEY, MISSING_SECRET_PREFIX
from apps.common.env import envbool, envfloat, envint, envjson, envlist, envsecret, envstr

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(envstr("GPUFINOPS_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

# ---- Core ----
DEBUG = envbool("DEBUG", True)
_DEV_SECRET = DEV_SECRET_KEY
# Unset in production: a random per-process placeholder, so that system check gpufinops.E002 (not an
# ImproperlyConfigured traceback) tells the operator, and nothing is ever signed with a known key.
SECRET_KEY = envsecret("SECRET_KEY", "") or (
    _DEV_SECRET if DEBUG else MISSING_SECRET_PREFIX + secrets.token_urlsafe(48)
)
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"] if DEBUG else [])
# Kubernetes: probes and Prometheus reach a pod by its IP (Host: <pod IP>:8000); the manifests pass the pod's
# own IP as POD_IP (downward API) so those requests pass host validation (docs/deploy.md, "Probes").
if envstr("POD_IP", "") and envstr("POD_IP", "") not in ALLOWED_HOSTS:
    ALLOWED_HOSTS.append(envstr("POD_IP", ""))
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and ReDoc served from static/, no CDN
    "axes",
    "apps.common",
    "apps.inventory",
    "apps.accounts",
    "apps.ingest",
    "apps.usage",
    "apps.capacity",
    "apps.queues",
    "apps.reports",
    "apps.findings",
    "apps.billing",
    "apps.budgets",
    "apps.savings",
    "apps.monitoring",
    "apps.dashboard",
]
# The simulated cluster and its commands (`demo`, `simulate`, `screenshots`) are for development and the tests:
# installed when GPUFINOPS_DEVTOOLS is on, which by default it is exactly when DEBUG is. The production image does
# not contain them at all (.dockerignore).
GPUFINOPS_DEVTOOLS = envbool("GPUFINOPS_DEVTOOLS", DEBUG)
if GPUFINOPS_DEVTOOLS:
    INSTALLED_APPS.append("devtools")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Cache-Control: no-store on every answer to a signed-in person (apps/accounts/middleware.py).
    "apps.accounts.middleware.NoStoreWhenSignedIn",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last: locks out repeated failed sign-ins (login page and admin).
    "axes.middleware.AxesMiddleware",
]

# ---- Company sign-in (OIDC, apps/accounts/oidc.py): on when GPUFINOPS_OIDC_ISSUER is set. Endpoints come from
# the issuer's discovery document; code flow with PKCE, state and nonce; the ID token checked against the JWKS,
# issuer, audience (the client id) and expiry. Teams and roles from the groups claim at every sign-in.
GPUFINOPS_OIDC_ISSUER = envstr("GPUFINOPS_OIDC_ISSUER", "")
OIDC_RP_CLIENT_ID = envstr("GPUFINOPS_OIDC_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = envsecret("GPUFINOPS_OIDC_CLIENT_SECRET", "")
OIDC_RP_SIGN_ALGO = envstr("GPUFINOPS_OIDC_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = envstr("GPUFINOPS_OIDC_SCOPES", "openid email profile groups")
OIDC_USE_PKCE = True
OIDC_USE_NONCE = True
OIDC_TIMEOUT = envfloat("GPUFINOPS_OIDC_TIMEOUT", 10.0)
OIDC_STORE_ID_TOKEN = True  # the id_token_hint of the provider's logout
OIDC_OP_LOGOUT_URL_METHOD = "apps.accounts.oidc.provider_logout_url"
OIDC_CREATE_USER = True
LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/?failed=company"
GPUFINOPS_OIDC_CLOCK_SKEW_SECONDS = envint("GPUFINOPS_OIDC_CLOCK_SKEW_SECONDS", 30)
GPUFINOPS_OIDC_USERNAME_CLAIM = envstr("GPUFINOPS_OIDC_USERNAME_CLAIM", "preferred_username")
GPUFINOPS_OIDC_GROUPS_CLAIM = envstr("GPUFINOPS_OIDC_GROUPS_CLAIM", "groups")
# Group -> team: a table (JSON object, e.g. {"ml-research": "research"}) and a pattern whose `team` group names
# the team (default: gpufinops-team-<team>); groups giving the finance role and staff.
GPUFINOPS_OIDC_GROUP_TEAMS: dict[str, str] = envjson("GPUFINOPS_OIDC_GROUP_TEAMS", {})
GPUFINOPS_OIDC_TEAM_GROUP_PATTERN = envstr("GPUFINOPS_OIDC_TEAM_GROUP_PATTERN", r"gpufinops-team-(?P<team>.+)")
GPUFINOPS_OIDC_FINANCE_GROUPS = envlist("GPUFINOPS_OIDC_FINANCE_GROUPS", ["gpufinops-finance"])
GPUFINOPS_OIDC_STAFF_GROUPS = envlist("GPUFINOPS_OIDC_STAFF_GROUPS", ["gpufinops-admin"])
# Local accounts (username and password, page and admin) for break-glass; off: only company sign-in (and API
# tokens for tools).
GPUFINOPS_LOCAL_SIGNIN = envbool("GPUFINOPS_LOCAL_SIGNIN", True)

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out username or address before checking
    *(["django.contrib.auth.backends.ModelBackend"] if GPUFINOPS_LOCAL_SIGNIN else []),
    *(["apps.accounts.oidc.IdentityProviderBackend"] if GPUFINOPS_OIDC_ISSUER else []),
    "apps.accounts.backends.StaffReadBackend",  # staff read the product's tables in the admin (authenticates nobody)
]

ROOT_URLCONF = "gpufinops.urls"
WSGI_APPLICATION = "gpufinops.wsgi.application"
ASGI_APPLICATION = "gpufinops.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "apps.accounts.context_processors.signin",
            ],
            # After Django's builtins, so its `urlize` wins: the browsable API links no URL in tenant-written
            # names (apps/common/templatetags/nolinks.py).
            "builtins": ["apps.common.templatetags.nolinks"],
        },
    },
]

# ---- Database ----
DATABASE_URL = envstr("DATABASE_URL", f"sqlite:///{VAR_DIR / 'gpufinops.sqlite3'}")
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=envint("DB_CONN_MAX_AGE", 0))}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web process read while a collection writes. IMMEDIATE transactions take the write lock
    # when they begin, so a second writer waits (up to `timeout` seconds) instead of failing mid-transaction
    # with "database is locked".
    DATABASES["default"].setdefault("OPTIONS", {})["init_command"] = "PRAGMA journal_mode=WAL;"
    DATABASES["default"]["OPTIONS"]["timeout"] = envint("SQLITE_BUSY_TIMEOUT", 60)
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = "IMMEDIATE"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# ---- Time: the ledger is UTC-only (a system check enforces it) ----
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# ---- Static files ----
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(envstr("STATIC_ROOT", str(VAR_DIR / "staticfiles")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns about a missing STATIC_ROOT
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    # js/plotly.min.js straight from the installed plotly package: nothing vendored into git.
    "apps.dashboard.staticfiles.PlotlyFinder",
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/"

# ---- Security (HTTPS settings follow the environment; see `check --deploy`) ----
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", not DEBUG)
# Probes and Prometheus scrape the pod over plain HTTP inside the cluster: never redirected.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^livez$", r"^metrics$"]
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", not DEBUG)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp): scripts, styles, images only from this origin. Plotly writes style
# attributes and a <style> element at run time, hence 'unsafe-inline' for styles (never for scripts).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:", "blob:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "worker-src": ["'self'", "blob:"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "frame-ancestors": ["'none'"],
        # Signing out posts here and continues at the identity provider's end-session page (apps/accounts/oidc.py).
        "form-action": ["'self'", *([GPUFINOPS_OIDC_ISSUER] if GPUFINOPS_OIDC_ISSUER else [])],
    }
}

# ---- Sign-in throttling (django-axes, apps/accounts/signin.py): failures are counted per (username, address) and
# per address, never per username alone. After AXES_FAILURE_LIMIT failures for one username from one address, or
# GPUFINOPS_SIGNIN_ADDRESS_FAILURE_LIMIT from one address for any usernames, sign-in from there is refused for
# AXES_COOLOFF_TIME hours, however right the password; the same person from another address still signs in. A
# success clears only the signed-in person's own failures from that address. `manage.py axes_reset_ip ADDRESS`
# or `axes_reset_username USERNAME` unlocks early.
AXES_FAILURE_LIMIT = envint("AXES_FAILURE_LIMIT", 5)
GPUFINOPS_SIGNIN_ADDRESS_FAILURE_LIMIT = max(envint("GPUFINOPS_SIGNIN_ADDRESS_FAILURE_LIMIT", 50), AXES_FAILURE_LIMIT)
AXES_COOLOFF_TIME = envfloat("AXES_COOLOFF_TIME_HOURS", 1.0)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address"]
AXES_HANDLER = "apps.accounts.signin.PairAndAddressAttempts"
AXES_RESET_ON_SUCCESS = True
# A request refused during a lock-out is not another failure: hammering a locked pair neither extends its cool-off
# nor counts towards locking the whole address.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_VERBOSE = False
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# The client address: REMOTE_ADDR, or behind GPUFINOPS_TRUSTED_PROXY_COUNT reverse proxies (an ingress: 1) the
# address the outermost of them put in X-Forwarded-For (django-ipware; apps/accounts/signin.py::client_address).
# AXES_PROXY_COUNT is the older name of the same setting.
GPUFINOPS_TRUSTED_PROXY_COUNT = envint("GPUFINOPS_TRUSTED_PROXY_COUNT", envint("AXES_PROXY_COUNT", 0))
AXES_CLIENT_IP_CALLABLE = "apps.accounts.signin.client_address"
if envbool("USE_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# ---- Celery: unset broker means tasks run in-process (the embedded default) ----
CELERY_BROKER_URL = envstr("CELERY_BROKER_URL", "")
CELERY_RESULT_BACKEND = envstr("CELERY_RESULT_BACKEND", "")
CELERY_TASK_ALWAYS_EAGER = CELERY_BROKER_URL == ""
CELERY_TASK_EAGER_PROPAGATES = True
# A ledger bucket must survive a worker dying mid-write: ack after the task, requeue on loss.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = envint("CELERY_TASK_SOFT_TIME_LIMIT", 540)
CELERY_TASK_TIME_LIMIT = envint("CELERY_TASK_TIME_LIMIT", 600)
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_TIMEZONE = "UTC"

# ---- Email (reports) ----
EMAIL_URL = envstr("EMAIL_URL", "")
if EMAIL_URL:
    from urllib.parse import unquote, urlparse

    _email = urlparse(EMAIL_URL)
    EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    EMAIL_HOST = _email.hostname or "localhost"
    EMAIL_PORT = _email.port or 25
    EMAIL_HOST_USER = unquote(_email.username or "")
    EMAIL_HOST_PASSWORD = unquote(_email.password or "")
    EMAIL_USE_TLS = _email.scheme in {"smtp+tls", "submission"}
    EMAIL_USE_SSL = _email.scheme == "smtps"
else:
    EMAIL_BACKEND = envstr("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
    EMAIL_HOST = envstr("EMAIL_HOST", "localhost")
    EMAIL_PORT = envint("EMAIL_PORT", 25)
DEFAULT_FROM_EMAIL = envstr("DEFAULT_FROM_EMAIL", "gpufinops@localhost")
# Where links in emails point (the dashboard's public address).
GPUFINOPS_BASE_URL = envstr("GPUFINOPS_BASE_URL", "http://127.0.0.1:8000")

# ---- Finance reports and the FOCUS export (apps/reports, docs/reports.md) ----
# Final periods ending within this many days are checked for restatements on every report run.
GPUFINOPS_REPORT_RESTATE_DAYS = envint("GPUFINOPS_REPORT_RESTATE_DAYS", 93)
# Attachments larger than this are not attached (the e-mail links to the archive's copy and prints its SHA-256).
GPUFINOPS_REPORT_MAX_ATTACHMENT_BYTES = envint("GPUFINOPS_REPORT_MAX_ATTACHMENT_BYTES", 10_000_000)
# Longest range of one /api/v1/exports/focus/ request.
GPUFINOPS_FOCUS_MAX_DAYS = envint("GPUFINOPS_FOCUS_MAX_DAYS", 93)
# FOCUS names: the internal platform that issues the chargeback (ProviderName, PublisherName, InvoiceIssuerName),
# the billing account every team's sub-account belongs to, and the prefix of the monthly InvoiceId.
GPUFINOPS_FOCUS_PROVIDER_NAME = envstr("GPUFINOPS_FOCUS_PROVIDER_NAME", "GPU Platform")
GPUFINOPS_FOCUS_BILLING_ACCOUNT_ID = envstr("GPUFINOPS_FOCUS_BILLING_ACCOUNT_ID", "gpu-fleet")
GPUFINOPS_FOCUS_BILLING_ACCOUNT_NAME = envstr("GPUFINOPS_FOCUS_BILLING_ACCOUNT_NAME", "GPU fleet")
GPUFINOPS_FOCUS_INVOICE_PREFIX = envstr("GPUFINOPS_FOCUS_INVOICE_PREFIX", "gpufinops")
# The cloud bill (docs/billing.md). Which cost a billed figure uses: EffectiveCost (amortized commitments and
# discounts: what the node really cost) or BilledCost (what the invoice says, commitments on their purchase rows).
GPUFINOPS_BILL_COST = envstr("GPUFINOPS_BILL_COST", "EffectiveCost")  # checked: gpufinops.E005
# The ledger's currency: bill lines in another are reported, not kept (no conversion).
GPUFINOPS_BILL_CURRENCY = envstr("GPUFINOPS_BILL_CURRENCY", "USD")
# GPU machine types (case-insensitive regex over a line's description, SKU details and resource name): how a GPU
# node's charge that matches no node is told from the rest of the bill. AWS p/g families, Google a2/a3/a4/g2,
# Azure N-series, Oracle GPU shapes.
GPUFINOPS_BILL_GPU_MACHINES = envstr(
    "GPUFINOPS_BILL_GPU_MACHINES",
    r"\b(?:p[2-6][a-z0-9-]*|g[3-6][a-z0-9]*|gr6)\.[0-9a-z]+\b|\b(?:a[2-4]|g2)-(?:high|mega|ultra|edge|standard)"
    r"[a-z]*-\d+g?\b|\bStandard_N[CDV]|\bN[CDV][0-9a-z_]* (?:v\d )?Series|\bGPU\b",
)

# ---- REST API ----
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.accounts.authentication.HashedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # Money as decimal strings in every answer (apps.common.renderers.DecimalJSONRenderer).
    "DEFAULT_RENDERER_CLASSES": [
        "apps.common.renderers.DecimalJSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Per user and window of the rate's period, one counter (apps/common/throttling.py).
    "DEFAULT_THROTTLE_CLASSES": ["apps.common.throttling.UserWindowRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"user": envstr("GPUFINOPS_API_RATE", "100000/hour")},
    "EXCEPTION_HANDLER": "apps.common.api.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "gpufinops API",
    "DESCRIPTION": "GPU-hour ledger, cost, fragmentation and queue quota. Numbers are defined in docs/numbers.md.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "ENUM_NAME_OVERRIDES": {
        "SignalEnum": "apps.usage.activity.SIGNALS",
        "FindingKindEnum": "apps.findings.constants.Kind",
        "ReportCadenceEnum": ["weekly", "monthly"],
    },
    # Swagger UI and ReDoc from the installed sidecar package (static files): no CDN, works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# ---- Caches (throttling); Redis when configured ----
CACHE_URL = envstr("CACHE_URL", "")
CACHES: dict[str, dict[str, Any]] = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
        if CACHE_URL
        # In-process fallback, bounded: at most this many entries (and answers over
        # GPUFINOPS_API_CACHE_MAX_BYTES are never cached), so memory cannot grow with requests.
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache",
              "OPTIONS": {"MAX_ENTRIES": envint("LOCMEM_CACHE_MAX_ENTRIES", 100)}}
    )
}

# ---- gpufinops domain settings (ledger.md) ----
GPUFINOPS_TEAM_LABEL = envstr("GPUFINOPS_TEAM_LABEL", "team")
GPUFINOPS_UNASSIGNED_TEAM = "unassigned"
GPUFINOPS_NODE_GROUP_LABELS = envlist(
    "GPUFINOPS_NODE_GROUP_LABELS",
    [
        "karpenter.sh/nodepool",
        "cloud.google.com/gke-nodepool",
        "eks.amazonaws.com/nodegroup",
        "kubernetes.azure.com/agentpool",
    ],
)
GPUFINOPS_MIG_WEIGHT_BY_MEMORY = envbool("GPUFINOPS_MIG_WEIGHT_BY_MEMORY", False)
# GPUs handed out by claims and fractions (ledger.md "GPUs handed out by claims (DRA) and by fractions (HAMi)"):
# the DRA drivers whose ResourceSlices publish GPUs; what a HAMi fraction is worth (cores, memory or the larger)
# and HAMi's resource names (its chart lets operators rename them).
GPUFINOPS_DRA_GPU_DRIVERS = envlist("GPUFINOPS_DRA_GPU_DRIVERS", ["gpu.nvidia.com"])
GPUFINOPS_HAMI_SHARE = envstr("GPUFINOPS_HAMI_SHARE", "cores")
GPUFINOPS_HAMI_VGPU_RESOURCE = envstr("GPUFINOPS_HAMI_VGPU_RESOURCE", "nvidia.com/gpu")
GPUFINOPS_HAMI_CORES_RESOURCE = envstr("GPUFINOPS_HAMI_CORES_RESOURCE", "nvidia.com/gpucores")
GPUFINOPS_HAMI_MEMORY_RESOURCE = envstr("GPUFINOPS_HAMI_MEMORY_RESOURCE", "nvidia.com/gpumem")
GPUFINOPS_HAMI_MEMORY_PERCENTAGE_RESOURCE = envstr("GPUFINOPS_HAMI_MEMORY_PERCENTAGE_RESOURCE",
                                                   "nvidia.com/gpumem-percentage")
GPUFINOPS_IDLE_THRESHOLD = envfloat("GPUFINOPS_IDLE_THRESHOLD", 0.01)
GPUFINOPS_IDLE_MIN_HOURS = envint("GPUFINOPS_IDLE_MIN_HOURS", 2)
# How far back an idle streak is followed (bounded work per page load).
GPUFINOPS_IDLE_LOOKBACK_HOURS = envint("GPUFINOPS_IDLE_LOOKBACK_HOURS", 168)
GPUFINOPS_BUCKET_LEASE_SECONDS = envint("GPUFINOPS_BUCKET_LEASE_SECONDS", 600)
# How far back a cluster's first collection reaches (then it resumes after the last final bucket).
GPUFINOPS_FIRST_RUN_HOURS = envint("GPUFINOPS_FIRST_RUN_HOURS", 24)
GPUFINOPS_MAX_RETRY_BACKOFF_SECONDS = envint("GPUFINOPS_MAX_RETRY_BACKOFF_SECONDS", 3600)
# A bucket still failing this long after its hour is given up (`abandoned`): past Prometheus' retention
# retrying cannot help.
GPUFINOPS_ABANDON_AFTER_DAYS = envint("GPUFINOPS_ABANDON_AFTER_DAYS", 14)
# At most this many buckets per cluster in one scheduled run (oldest first), so a long catch-up finishes
# within the task's time limit and continues on the next run. `collect --since` is not capped.
GPUFINOPS_MAX_BUCKETS_PER_RUN = envint("GPUFINOPS_MAX_BUCKETS_PER_RUN", 48)
# Pod and node rows are kept this many whole months (then dropped by month: `prune_ledger`); the rollups every
# report reads are kept. 0 keeps everything.
GPUFINOPS_LEDGER_KEEP_MONTHS = envint("GPUFINOPS_LEDGER_KEEP_MONTHS", 13)
# The activity signal the dashboards, reports and API use unless asked for another (ledger.md "Activity").
GPUFINOPS_DEFAULT_SIGNAL = envstr("GPUFINOPS_DEFAULT_SIGNAL", "sm_active")
GPUFINOPS_API_MAX_RANGE_DAYS = envint("GPUFINOPS_API_MAX_RANGE_DAYS", 400)
# Usage answers are cached until the ledger changes (keyed by its version), at most this long; 0 = off.
GPUFINOPS_API_CACHE_SECONDS = envint("GPUFINOPS_API_CACHE_SECONDS", 300)
GPUFINOPS_API_CACHE_MAX_BYTES = envint("GPUFINOPS_API_CACHE_MAX_BYTES", 1_000_000)
# Bounded work per request: at most this many result rows per usage answer, hour-level answers (group_by
# hour, or ranges not on whole days) over at most this many days; team members' history ranges likewise.
GPUFINOPS_API_MAX_ROWS = envint("GPUFINOPS_API_MAX_ROWS", 20_000)
GPUFINOPS_API_MAX_HOURLY_DAYS = envint("GPUFINOPS_API_MAX_HOURLY_DAYS", 31)
# PostgreSQL work_mem for a ranking's statement (its transaction only): a month of a large fleet groups ~160k
# workloads, which spill to disk at the server's default 4MB; "" keeps the server's setting.
GPUFINOPS_RANKING_WORK_MEM = envstr("GPUFINOPS_RANKING_WORK_MEM", "64MB")
# A change is shown only against a period with comparable coverage: at least this share of its hours final.
GPUFINOPS_COMPARE_MIN_FINAL = envfloat("GPUFINOPS_COMPARE_MIN_FINAL", 0.9)
GPUFINOPS_API_MEMBER_HISTORY_DAYS = envint("GPUFINOPS_API_MEMBER_HISTORY_DAYS", 31)
GPUFINOPS_API_MAX_HISTORY_DAYS = envint("GPUFINOPS_API_MAX_HISTORY_DAYS", 93)
# API tokens: default and longest lifetime.
GPUFINOPS_API_TOKEN_DAYS = envint("GPUFINOPS_API_TOKEN_DAYS", 90)
GPUFINOPS_API_TOKEN_MAX_DAYS = envint("GPUFINOPS_API_TOKEN_MAX_DAYS", 365)
# Fernet key(s) encrypting cluster credentials at rest, newest first (apps/common/secrets.py).
GPUFINOPS_SECRETS_KEY = envsecret("GPUFINOPS_SECRETS_KEY", "")
GPUFINOPS_PROMETHEUS_TIMEOUT = envfloat("GPUFINOPS_PROMETHEUS_TIMEOUT", 30.0)
GPUFINOPS_KUBERNETES_TIMEOUT = envfloat("GPUFINOPS_KUBERNETES_TIMEOUT", 30.0)
# At most this many of a bucket's independent Prometheus queries in flight at once (1: one at a time).
GPUFINOPS_PROMETHEUS_PARALLEL = envint("GPUFINOPS_PROMETHEUS_PARALLEL", 3)
# Read the series of deploy/monitoring/gpufinops-recording.yaml when they cover a bucket (else the raw series;
# the same ledger either way): off to always read the raw series.
GPUFINOPS_PROMETHEUS_RECORDING_RULES = envbool("GPUFINOPS_PROMETHEUS_RECORDING_RULES", True)

# ---- Findings (apps/findings, docs/findings.md): the rules' thresholds, infra loss, telling the owners ----
# Idle-held: an idle allocation with more than this much framebuffer in use (MiB, average over the hour).
GPUFINOPS_FB_USED_MIN_MIB = envfloat("GPUFINOPS_FB_USED_MIN_MIB", 1024.0)
# Stragglers: the slowest GPU of a workload below this fraction of the workload's median activity, for at least
# this many consecutive hours.
GPUFINOPS_STRAGGLER_FRACTION = envfloat("GPUFINOPS_STRAGGLER_FRACTION", 0.6)
GPUFINOPS_STRAGGLER_MIN_HOURS = envint("GPUFINOPS_STRAGGLER_MIN_HOURS", 2)
# Unattributed activity: a device nobody holds, busier than this (default signal) over the hour.
GPUFINOPS_UNATTRIBUTED_THRESHOLD = envfloat("GPUFINOPS_UNATTRIBUTED_THRESHOLD", 0.05)
# Unhealthy GPUs: XID codes that mean the hardware (not the application: 13, 31, 43, 45 are left out), the
# clock-event reasons counted as throttling (hw_slowdown 0x8, sw_thermal 0x20, hw_thermal 0x40, hw_power_brake
# 0x80; not sw_power_cap 0x4, which a busy healthy GPU shows at its power limit) and the share of an hour
# throttled that makes it unhealthy (0: any throttled sample).
GPUFINOPS_XID_CODES = [int(c) for c in envlist(
    "GPUFINOPS_XID_CODES", ["48", "61", "62", "63", "64", "74", "79", "92", "94", "95", "119", "120", "140"])]
GPUFINOPS_THROTTLE_REASONS_MASK = envint("GPUFINOPS_THROTTLE_REASONS_MASK", 0xE8)
GPUFINOPS_THROTTLE_MIN_SHARE = envfloat("GPUFINOPS_THROTTLE_MIN_SHARE", 0.0)
# Borrowed-while-idle: a ClusterQueue's borrowed GPUs that sat idle, per hour, from this many GPU-hours.
GPUFINOPS_BORROWED_IDLE_MIN_GPU_HOURS = envfloat("GPUFINOPS_BORROWED_IDLE_MIN_GPU_HOURS", 0.5)
# Infra loss (unhealthy GPUs' held hours) is always shown beside the charge; credited back to teams in the
# reports only when this is on. The ledger's numbers never change.
GPUFINOPS_INFRA_LOSS_CREDIT = envbool("GPUFINOPS_INFRA_LOSS_CREDIT", False)
# Notifications: idle allocations once idle this many hours; at most this many messages per recipient (a person
# or a team webhook) and team per hour (more go out as one summary); failed sends retried with backoff up to
# this many attempts; only findings whose last hour is this recent are told (a backfill does not mail history).
GPUFINOPS_NOTIFY_IDLE_HOURS = envint("GPUFINOPS_NOTIFY_IDLE_HOURS", 2)
GPUFINOPS_NOTIFY_MAX_PER_HOUR = envint("GPUFINOPS_NOTIFY_MAX_PER_HOUR", 10)
GPUFINOPS_NOTIFY_MAX_ATTEMPTS = envint("GPUFINOPS_NOTIFY_MAX_ATTEMPTS", 5)
GPUFINOPS_NOTIFY_RECENT_HOURS = envint("GPUFINOPS_NOTIFY_RECENT_HOURS", 24)
# Webhook POSTs (apps/common/outbound.py): connect and read timeouts, each at most 30 s; targets must resolve to
# public addresses only (never loopback, private, link-local such as the metadata service 169.254.169.254), except
# the host names listed here (exact names, e.g. an internal chat server); redirects are never followed.
GPUFINOPS_WEBHOOK_TIMEOUT = envfloat("GPUFINOPS_WEBHOOK_TIMEOUT", 10.0)
GPUFINOPS_WEBHOOK_ALLOWED_HOSTS = envlist("GPUFINOPS_WEBHOOK_ALLOWED_HOSTS", [])

# ---- Self-monitoring (apps/monitoring, docs/operations.md) ----
# GET /metrics is served to a bearer token, to clients inside these networks, and to signed-in staff.
GPUFINOPS_METRICS_TOKEN = envsecret("GPUFINOPS_METRICS_TOKEN", "")
GPUFINOPS_METRICS_ALLOWED_NETWORKS = envlist("GPUFINOPS_METRICS_ALLOWED_NETWORKS", ["127.0.0.1/32", "::1/128"])
GPUFINOPS_METRICS_WINDOW_DAYS = envint("GPUFINOPS_METRICS_WINDOW_DAYS", 7)  # gpufinops_buckets counts these days
GPUFINOPS_COLLECTION_RUN_DAYS = envint("GPUFINOPS_COLLECTION_RUN_DAYS", 7)  # CollectionRun rows kept this long
# Celery workers touch this file from their event loop (the liveness probe checks its age); unset: off.
GPUFINOPS_WORKER_HEARTBEAT_FILE = envstr("GPUFINOPS_WORKER_HEARTBEAT_FILE", "")
# Celery keeps Django's LOGGING (JSON lines in production) instead of installing its own root handler.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# ---- Logging: one line per event on stderr; JSON (LOG_FORMAT=json) by default when DEBUG is off. Lines
# logged during a collection carry `cluster` and `bucket` (apps/monitoring/logs.py).
LOG_FORMAT = envstr("LOG_FORMAT", "plain" if DEBUG else "json")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "context": {"()": "apps.monitoring.logs.ContextFilter"},
        # urllib3 prints request paths and URLs (a webhook's key, a Prometheus path token): cut to the host.
        "http_client": {"()": "apps.common.redaction.HttpClientLogFilter"},
    },
    "formatters": {
        "plain": {"()": "apps.monitoring.logs.PlainFormatter"},
        "json": {"()": "apps.monitoring.logs.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json" if LOG_FORMAT == "json" else "plain",
            "filters": ["context"],
        }
    },
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        **{name: {"filters": ["http_client"]} for name in (
            "urllib3.connectionpool", "urllib3.connection", "urllib3.poolmanager", "urllib3.response",
            "urllib3.util.retry",
        )},
    },
}
