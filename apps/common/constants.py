"""Constants shared by settings.py and the system checks."""

# The development SECRET_KEY: used only while DEBUG is on; check gpufinops.E002 refuses it otherwise.
DEV_SECRET_KEY = "django-insecure-gpufinops-development-only-key-do-not-use-in-production"
# settings.py puts this prefix in front of a random placeholder when SECRET_KEY is unset and DEBUG is off,
# so the operator sees check gpufinops.E002 instead of Django's ImproperlyConfigured traceback.
MISSING_SECRET_PREFIX = "gpufinops-secret-key-unset-"
MIN_SECRET_KEY_LENGTH = 50
