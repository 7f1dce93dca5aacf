from __future__ import annotations

from django.apps import AppConfig


class ShopConfig(AppConfig):  # type: ignore[misc]
    name = "kue_example.django_shop"
    label = "shop"
