"""One id box for the console: paste an evt_, dlv_ or ep_ id, land on its page."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import reverse

# id prefix -> (app label, model name): the page each id opens.
PREFIXES = {
    "evt_": ("deliveries", "event"),
    "dlv_": ("deliveries", "delivery"),
    "ep_": ("endpoints", "endpoint"),
}


def id_target(text: str) -> tuple[str, str, str] | None:
    """(app label, model name, id) for a pasted id, or None when it is not one.

    Spaces and quotes around a pasted id are dropped; case is kept (ids are
    lower case, and a wrong case finds nothing rather than something else).
    """
    value = text.strip().strip("'\"` ")
    for prefix, (app, model) in PREFIXES.items():
        if value.startswith(prefix) and len(value) > len(prefix):
            return app, model, value
    return None


def admin_find(request: HttpRequest) -> HttpResponseRedirect:
    """Redirect to the object's page, or back to the index saying why not.

    An id the user may not view reads as not found: it tells nothing about
    rows out of their reach.
    """
    from django.apps import apps

    index = reverse("admin:index")
    text = request.GET.get("q", "")
    target = id_target(text)
    if target is None:
        messages.error(
            request,
            "Paste an id that starts with evt_, dlv_ or ep_ (an event, a delivery "
            "or an endpoint).",
        )
        return HttpResponseRedirect(index)
    app, model_name, pk = target
    model = apps.get_model(app, model_name)
    may_view = request.user.has_perm(f"{app}.view_{model_name}") or (
        request.user.has_perm(f"{app}.change_{model_name}")
    )
    if not may_view or not model._default_manager.filter(pk=pk).exists():
        messages.error(request, f"No {model._meta.verbose_name} has the id {pk}.")
        return HttpResponseRedirect(index)
    return HttpResponseRedirect(reverse(f"admin:{app}_{model_name}_change", args=[pk]))
