"""The worker's side: handlers that use the ORM (run by ``django-admin kue_worker``)."""

from __future__ import annotations

from typing import Any

from kue_core import Job, NoRetry

from .models import Order


def confirm_order(job: Job) -> dict[str, Any]:
    try:
        order = Order.objects.get(pk=job.data["order"])
    except Order.DoesNotExist:
        raise NoRetry(f"no order {job.data['order']}") from None
    order.status = "confirmed"
    order.save(update_fields=["status"])
    return {"order": order.pk, "email": order.email}
