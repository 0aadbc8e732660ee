"""Every portal object is fetched through what the visitor may see.

A visitor is either a signed-in user, who sees the merchants of their
memberships, or the holder of a portal-link session (endpoints/portal_links.py),
who sees the one merchant of that link with the link's role and has no
Django user. `portal_view` resolves the merchant, endpoint and delivery named
in the URL before anything else, so another merchant's id is a 404 for every
method; only then are the method and the role checked.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import render
from django.urls import reverse

from deliveries.models import Delivery
from endpoints import portal_links
from endpoints.models import Endpoint, Membership, Merchant
from relayproject.lib.clock import utcnow
from relayproject.portal.selectors import delivery_of_merchant

logger = logging.getLogger("relayproject.portal")

READ = ("GET", "HEAD")
WRITE = ("POST",)
EDITING_ROLES = (Membership.Role.OWNER, Membership.Role.DEVELOPER)


@dataclass(frozen=True)
class Grant:
    """What a visitor may see of one merchant, and as whom it is logged."""

    merchant: Merchant
    role: str
    who: str  # "user 12" or "portal link 5": logs name the actor, never a secret
    via_link: bool = False


@dataclass(frozen=True)
class Access:
    grant: Grant
    endpoint: Endpoint | None = None
    delivery: Delivery | None = None

    @property
    def merchant(self) -> Merchant:
        return self.grant.merchant

    @property
    def role(self) -> str:
        return self.grant.role

    @property
    def role_label(self) -> str:
        return Membership.Role(self.grant.role).label

    @property
    def who(self) -> str:
        return self.grant.who

    @property
    def can_edit(self) -> bool:
        return self.grant.role in EDITING_ROLES

    @property
    def is_owner(self) -> bool:
        return self.grant.role == Membership.Role.OWNER


def grant_get(request: HttpRequest, *, slug: str) -> Grant:
    """The visitor's grant on the merchant with this slug, or Http404."""
    link = portal_links.session_link(request.session, now=utcnow())
    if link is not None:
        merchant = Merchant.objects.filter(
            pk=link.merchant_id, slug=slug, is_active=True
        ).first()
        if merchant is None:
            raise Http404("No such merchant")
        return Grant(merchant, link.role, f"portal link {link.link_id}", True)
    try:
        membership = Membership.objects.select_related("merchant").get(
            user=request.user, merchant__slug=slug, merchant__is_active=True
        )
    except Membership.DoesNotExist:
        raise Http404("No such merchant") from None
    return Grant(membership.merchant, membership.role, f"user {request.user.pk}")


def signed_in(request: HttpRequest) -> bool:
    return request.user.is_authenticated or (
        portal_links.session_link(request.session, now=utcnow()) is not None
    )


def access_resolve(
    request: HttpRequest,
    *,
    slug: str,
    endpoint_id: str | None = None,
    delivery_id: str | None = None,
) -> Access:
    """The grant and the objects the URL names, or Http404."""
    grant = grant_get(request, slug=slug)
    endpoint = None
    if endpoint_id is not None:
        endpoint = (
            Endpoint.objects.select_related("health")
            .filter(pk=endpoint_id, merchant=grant.merchant)
            .first()
        )
        if endpoint is None:
            raise Http404("No such endpoint")
    delivery = None
    if delivery_id is not None:
        delivery = delivery_of_merchant(
            merchant_id=grant.merchant.pk, delivery_id=delivery_id
        )
        if delivery is None:
            raise Http404("No such delivery")
    return Access(grant=grant, endpoint=endpoint, delivery=delivery)


def portal_view(
    *, methods: Sequence[str] = READ, edits: bool = True
) -> Callable[[Callable], Callable]:
    """Wrap a view taking (request, access): sign-in, 404, 403 for viewers, 405.

    With edits=True a view that takes a POST is a write URL: every method of
    it, GET of its form included, needs an owner or developer role; a viewer
    gets the branded 403 page (forbidden_page). The wrapper carries
    `portal_methods` and `portal_writes`, which tests read off the URLconf.
    """
    allowed = list(methods)
    writes = edits and any(method in WRITE for method in allowed)

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapper(
            request: HttpRequest,
            slug: str,
            endpoint_id: str | None = None,
            delivery_id: str | None = None,
        ) -> HttpResponse:
            if not signed_in(request):
                return redirect_to_login(request.get_full_path())
            access = access_resolve(
                request,
                slug=slug,
                endpoint_id=endpoint_id,
                delivery_id=delivery_id,
            )
            # The role first: a viewer hears "not for you" at a write URL
            # whatever the method, not "try POST".
            if writes and not access.can_edit:
                return forbidden_page(request, access)
            if request.method not in allowed:
                return HttpResponseNotAllowed(allowed)
            return view(request, access)

        wrapper.portal_methods = tuple(allowed)
        wrapper.portal_writes = writes
        return wrapper

    return decorate


def forbidden_page(request: HttpRequest, access: Access) -> HttpResponse:
    """403 for a role that may not do this: what the role allows, and a way back.

    Rendered here rather than raised, so the log has one warning line from
    Django ("Forbidden: <path>") and this info line, never a traceback.
    """
    logger.info(
        "portal write refused by=%s role=%s merchant=%s method=%s view=%s",
        access.who,
        access.role,
        access.merchant.slug,
        request.method,
        request.resolver_match.url_name if request.resolver_match else "-",
    )
    slug = access.merchant.slug
    if access.delivery is not None:
        back = reverse("portal:delivery_detail", args=[slug, access.delivery.pk])
        back_label = f"Back to delivery {access.delivery.pk}"
    elif access.endpoint is not None:
        back = reverse("portal:endpoint_detail", args=[slug, access.endpoint.pk])
        back_label = f"Back to endpoint {access.endpoint.pk}"
    else:
        back = reverse("portal:endpoint_list", args=[slug])
        back_label = f"Back to {access.merchant.name}"
    return render(
        request,
        "portal/forbidden.html",
        {
            "access": access,
            "merchant": access.merchant,
            "endpoint": access.endpoint,
            "can_edit": access.can_edit,
            "back": back,
            "back_label": back_label,
        },
        status=403,
    )
