"""A Content-Security-Policy on every page, and no page that needs an exception to it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from deliveries.models import Delivery
from deliveries.services import event_publish
from endpoints.models import Membership
from tests.support import factories
from tests.support.browser import chromium_page, shot

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE_DIRS = [ROOT / "templates", *ROOT.glob("*/templates")]
# Inline script (a <script> without src), <style>, style="", on*= handlers.
INLINE = re.compile(
    r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>|<style\b"
    r"|\sstyle=\"|\son[a-z]+=",
    re.I,
)
PASSWORD = "pw-for-tests-only"


def policy(response) -> dict[str, str]:
    header = response["Content-Security-Policy"]
    return dict(
        part.strip().split(" ", 1) for part in header.split(";") if part.strip()
    )


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/portal/login/", "/admin/login/", "/api/v1/docs"])
def test_every_page_carries_a_policy_of_own_scripts_and_styles_only(url):
    directives = policy(Client().get(url))
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["default-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in " ".join(directives.values())


def test_no_template_has_inline_script_or_style():
    offenders = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for folder in TEMPLATE_DIRS
        for path in folder.rglob("*.html")
        for match in INLINE.finditer(path.read_text())
    ]
    assert offenders == []


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_pages_run_with_no_policy_violation_in_chromium(live_server, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.RELAY_DEMO = True
    merchant = factories.merchant("acme")
    endpoint = factories.endpoint(merchant)
    event_publish(merchant=merchant, type="order.paid", data={"n": 1})
    delivery = Delivery.objects.get()  # pending: its page polls (static JS)
    User.objects.create_superuser("root", password=PASSWORD)
    owner = User.objects.create_user("owner", password=PASSWORD)
    Membership.objects.create(user=owner, merchant=merchant, role="owner")
    ep = f"/portal/m/acme/endpoints/{endpoint.pk}/"
    portal = [
        "/portal/m/acme/",
        ep,
        f"{ep}health/",
        f"{ep}deliveries/",
        "/portal/m/acme/deliveries/",
        f"/portal/m/acme/deliveries/{delivery.pk}/",
    ]
    admin = [
        "/admin/",
        "/admin/deliveries/pipeline/",
        f"/admin/deliveries/delivery/{delivery.pk}/change/",
        "/admin/deliveries/deadletter/",
        f"/admin/endpoints/endpoint/{endpoint.pk}/change/",
        f"/admin/endpoints/merchant/{merchant.pk}/change/",
        "/admin/endpoints/apikey/add/",
    ]
    violations: list[str] = []
    with chromium_page(width=1280, height=900) as page:
        page.on(
            "console",
            lambda m: (
                violations.append(f"{page.url}: {m.text}")
                if "Content Security Policy" in m.text
                else None
            ),
        )
        for login, username, pages in (
            ("/portal/login/", "owner", portal),
            ("/admin/login/", "root", admin),
        ):
            page.goto(live_server.url + login)
            page.fill("#id_username", username)
            page.fill("#id_password", PASSWORD)
            page.click("[type=submit]")
            page.wait_for_load_state()
            for url in pages:
                page.goto(live_server.url + url)
                page.wait_for_load_state("networkidle")
        page.goto(f"{live_server.url}/api/v1/docs")
        page.wait_for_selector(".swagger-ui .info")
        page.goto(f"{live_server.url}/demo/receiver/{endpoint.pk}/")
        page.wait_for_load_state("networkidle")
        shot(page, "csp-demo-receiver")
    assert violations == []
