"""One model: an order, confirmed by a job."""

from __future__ import annotations

from django.db import models


class Order(models.Model):  # type: ignore[misc]
    email = models.EmailField()
    status = models.CharField(max_length=20, default="placed")
    created_at = models.DateTimeField(auto_now_add=True)
