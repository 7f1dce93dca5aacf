"""``POST /orders`` (JSON ``{"email": ...}``): place an order; its confirmation is a job."""

from __future__ import annotations

import json

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from .orders import place_order


@csrf_exempt  # type: ignore[untyped-decorator]
@require_POST  # type: ignore[untyped-decorator]
def orders(request: HttpRequest) -> JsonResponse:
    # A JSON body only: a browser sends one to another site only after a CORS preflight that
    # this view does not answer, so no other site can post here (the dashboard's rule too),
    # which is why Django's cookie-and-token CSRF check is not needed for it.
    if request.content_type != "application/json":
        return JsonResponse({"error": "send the order as application/json"}, status=415)
    try:
        body = json.loads(request.body)
        email = body["email"]
        validate_email(email)
    except (ValueError, KeyError, TypeError, ValidationError):
        return JsonResponse({"error": 'send {"email": an email address}'}, status=400)
    order = place_order(email)
    return JsonResponse({"id": order.pk, "status": order.status}, status=201)
