"""Placing an order: the row, and its confirmation job once the row is committed."""

from __future__ import annotations

from django.db import transaction

from .jobs import enqueue_on_commit
from .models import Order


def place_order(email: str) -> Order:
    with transaction.atomic():
        order: Order = Order.objects.create(email=email)
        enqueue_on_commit("confirm order", {"order": order.pk}, attempts=3)
    return order
