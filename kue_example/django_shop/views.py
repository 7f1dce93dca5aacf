"""``POST /orders`` (JSON ``{"email": ...}``): place an order; its confirmation is a job."""

from __future__ import annotations

import json

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_POST

from .orders import place_order


@require_POST  # type: ignore[untyped-decorator]
def orders(request: HttpRequest) -> JsonResponse:
    try:
        body = json.loads(request.body)
        email = body["email"]
        validate_email(email)
    except (ValueError, KeyError, TypeError, ValidationError):
        return JsonResponse({"error": 'send {"email": an email address}'}, status=400)
    order = place_order(email)
    return JsonResponse({"id": order.pk, "status": order.status}, status=201)
