"""What the host's pages and the relay's routes answer, as JSON: the admin
(the host's site, the relay's models in it), the portal and the API under
the host's prefix, and the host's own API beside them."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand
from django.test import Client
from django.urls import reverse
from shop.models import User

from endpoints.apikeys import apikey_create
from endpoints.merchant_services import merchant_create
from endpoints.models import Membership

ADMIN_PAGES = [
    "/admin/",
    "/admin/shop/order/",
    "/admin/shop/user/",
    "/admin/endpoints/merchant/",
    "/admin/endpoints/endpoint/",
    "/admin/deliveries/event/",
    "/admin/deliveries/delivery/",
]


class Command(BaseCommand):
    def handle(self, *args, **options) -> None:
        bob = User.objects.create_user("bob", "bob@shop.example", "pw-bob-1")
        merchant = merchant_create(slug="pages", name="Pages")
        Membership.objects.create(
            user=bob, merchant=merchant, role=Membership.Role.OWNER
        )
        found: dict[str, object] = {"portal_home": reverse("portal:home")}

        staff = Client()
        staff.force_login(User.objects.create_superuser("root", "", "pw-root-1"))
        pages = [
            *ADMIN_PAGES,
            reverse("admin:endpoints_merchant_change", args=[merchant.pk]),
            reverse("admin:deliveries_pipeline"),
        ]
        found["admin"] = {page: staff.get(page).status_code for page in pages}
        pipeline = staff.get(reverse("admin:deliveries_pipeline")).content.decode()
        found["pipeline_links_metrics"] = 'href="/relay/metrics"' in pipeline

        anonymous = Client()
        found["portal_anonymous"] = anonymous.get("/relay/portal/")["Location"]
        found["healthz"] = anonymous.get("/relay/healthz").status_code
        refused = anonymous.post(
            "/relay/api/v1/events", "hello", content_type="text/plain"
        )
        found["relay_api_text"] = [refused.status_code, refused["Content-Type"]]
        echoed = anonymous.post("/api/echo", "hello", content_type="text/plain")
        found["host_api_text"] = [echoed.status_code, echoed.content.decode()]

        _key, raw_key = apikey_create(name="platform", merchant=None)
        made = anonymous.post(
            f"/relay/api/v1/merchants/{merchant.slug}/portal-sessions",
            "{}",
            content_type="application/json",
            headers={"authorization": f"Bearer {raw_key}"},
        )
        url = made.json().get("url", "")
        found["portal_link"] = [made.status_code, url[: url.find("/link/") + 6]]

        owner = Client()
        owner.force_login(bob)
        page = owner.get(reverse("portal:endpoint_list", args=[merchant.slug]))
        body = page.content.decode()
        found["portal_page"] = {
            "status": page.status_code,
            "product_name": "Shop webhooks" in body,
            "links_under_prefix": 'href="/relay/portal/' in body,
            "links_at_root": 'href="/portal/' in body,
        }
        self.stdout.write(json.dumps(found))
