# gpufinops: one image for web (gunicorn), worker and beat (celery); see docker-compose.yml.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    GPUFINOPS_VAR_DIR=/app/var \
    STATIC_ROOT=/app/staticfiles

WORKDIR /app
COPY . .
RUN pip install --no-cache-dir . \
    && DEBUG=1 python manage.py collectstatic --noinput \
    && useradd --system --home-dir /app gpufinops \
    && mkdir -p /app/var && chown -R gpufinops /app/var

USER gpufinops
EXPOSE 8000
CMD ["gunicorn", "gpufinops.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3"]
