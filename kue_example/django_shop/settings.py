"""Settings of the recipe's project: environment variables in, as a deployment would."""

from __future__ import annotations

import os

DEBUG = os.environ.get("DJANGO_DEBUG") == "1"
# A key of its own for a deployment; the recipe's own only while debugging.
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or ("recipe-only-key" if DEBUG else "")
if not SECRET_KEY:
    raise RuntimeError("set DJANGO_SECRET_KEY (or DJANGO_DEBUG=1 to try the recipe)")
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,testserver").split(",")
INSTALLED_APPS = ["django.contrib.contenttypes", "kue_example.django_shop.apps.ShopConfig"]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
]
ROOT_URLCONF = "kue_example.django_shop.urls"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("SHOP_DB", "shop.sqlite3"),
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True

# The queue: kue's own variables, as the `kue` command reads them (no URL: the embedded Redis).
KUE_REDIS_URL = os.environ.get("KUE_REDIS_URL")
KUE_PREFIX = os.environ.get("KUE_PREFIX")
#: Job type -> its handler ("module:function"), for ``django-admin kue_worker``.
KUE_HANDLERS = {"confirm order": "kue_example.django_shop.handlers:confirm_order"}
