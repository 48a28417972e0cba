# gpufinops: one image for web (gunicorn), worker and beat (celery) and the migration Job (docker-compose.yml,
# deploy/k8s). Built for Kubernetes' restricted security context: runs as the numeric UID 10001 (runAsNonRoot
# can verify it), owns none of its files, and writes nothing outside the volumes mounted at run time (/tmp,
# /dev/shm): static files are collected here, bytecode is compiled here, HOME points at /tmp.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp \
    GPUFINOPS_VAR_DIR=/app/var \
    STATIC_ROOT=/app/staticfiles

WORKDIR /app

# Dependencies first: this layer is reused until pyproject.toml changes (the project installs no packages of
# its own: the code runs from /app).
COPY pyproject.toml ./
RUN pip install .

COPY . .
# devtools/ (the simulator and demo) is not in the build context (.dockerignore): DEBUG=1 for collectstatic must
# not install it.
RUN DEBUG=1 GPUFINOPS_DEVTOOLS=0 python manage.py collectstatic --noinput --verbosity 0 \
    && python -m compileall -q apps gpufinops manage.py \
    && groupadd --system --gid 10001 gpufinops \
    && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin gpufinops \
    && mkdir -p /app/var && chown 10001:10001 /app/var

# /app/var is writable only for a plain `docker run` trial on SQLite; Kubernetes mounts the root filesystem
# read-only and uses PostgreSQL.
USER 10001:10001
EXPOSE 8000
CMD ["gunicorn", "gpufinops.wsgi", "--bind", "0.0.0.0:8000", "--workers", "2", "--threads", "4", \
     "--worker-tmp-dir", "/dev/shm", "--access-logfile", "-"]
