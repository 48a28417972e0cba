"""Real-service test harness: PostgreSQL, Redis, a Celery worker process, Prometheus and SMTP.

The fixtures live in tests/conftest.py; the machinery they use lives here so that a test can also drive it
directly (stop Prometheus mid-test, SIGKILL a worker, ...).
"""
