"""Every portal object is fetched through the signed-in user's memberships.

`portal_view` resolves the merchant, endpoint and delivery named in the URL
before anything else, so another merchant's id is a 404 for every method;
only then are the method and the role checked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed

from endpoints.models import Endpoint, Membership, Merchant

READ = ("GET", "HEAD")
WRITE = ("POST",)


@dataclass(frozen=True)
class Access:
    membership: Membership
    endpoint: Endpoint | None = None
    delivery: object | None = None  # deliveries.models.Delivery

    @property
    def merchant(self) -> Merchant:
        return self.membership.merchant

    @property
    def can_edit(self) -> bool:
        return self.membership.can_edit


def membership_get(*, user, slug: str) -> Membership:
    try:
        return Membership.objects.select_related("merchant").get(
            user=user, merchant__slug=slug, merchant__is_active=True
        )
    except Membership.DoesNotExist:
        raise Http404("No such merchant") from None


def access_resolve(
    *, user, slug: str, endpoint_id: str | None = None, delivery_id: str | None = None
) -> Access:
    """The membership and the objects the URL names, or Http404."""
    from deliveries.portal_selectors import delivery_of_merchant

    membership = membership_get(user=user, slug=slug)
    endpoint = None
    if endpoint_id is not None:
        endpoint = (
            Endpoint.objects.select_related("health")
            .filter(pk=endpoint_id, merchant=membership.merchant)
            .first()
        )
        if endpoint is None:
            raise Http404("No such endpoint")
    delivery = None
    if delivery_id is not None:
        delivery = delivery_of_merchant(
            merchant_id=membership.merchant_id, delivery_id=delivery_id
        )
        if delivery is None:
            raise Http404("No such delivery")
    return Access(membership=membership, endpoint=endpoint, delivery=delivery)


def portal_view(
    *, methods: Sequence[str] = READ, edits: bool = True
) -> Callable[[Callable], Callable]:
    """Wrap a view taking (request, access): sign-in, 404, 405, then 403 for viewers.

    With edits=True every POST needs an owner or developer role.
    """
    allowed = list(methods)

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        @login_required
        def wrapper(
            request: HttpRequest,
            slug: str,
            endpoint_id: str | None = None,
            delivery_id: str | None = None,
        ) -> HttpResponse:
            access = access_resolve(
                user=request.user,
                slug=slug,
                endpoint_id=endpoint_id,
                delivery_id=delivery_id,
            )
            if request.method not in allowed:
                return HttpResponseNotAllowed(allowed)
            if edits and request.method in WRITE and not access.can_edit:
                raise PermissionDenied("Viewers cannot change anything.")
            return view(request, access)

        return wrapper

    return decorate
