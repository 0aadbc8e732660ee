from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt


@csrf_exempt
def echo(request: HttpRequest) -> HttpResponse:
    """The project's own API, which takes plain text."""
    return HttpResponse(request.body, content_type="text/plain")
