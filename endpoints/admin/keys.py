"""API keys in the admin: who may make which, the full key shown once, revocation.

A merchant-scoped key acts for its merchant through the API (endpoints,
secrets, portal links), so making one is its own permission
(`endpoints.create_api_key`), not Django's "add API key"; a platform key acts
for every merchant, so only superusers make those, and only superusers let a
scoped key make owner portal links. Each key made is in the admin log and
the app log.
"""

from __future__ import annotations

import logging

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.utils.cache import add_never_cache_headers

from endpoints.admin.present import MerchantOnlyFilter, QuickRows
from endpoints.apikeys import apikey_create, apikey_revoke
from endpoints.models import ApiKey

logger = logging.getLogger(__name__)

CREATE_PERMISSION = "endpoints.create_api_key"


def may_create_api_keys(user) -> bool:
    return user.is_active and (user.is_superuser or user.has_perm(CREATE_PERMISSION))


class ApiKeyCreateForm(forms.ModelForm):
    class Meta:
        model = ApiKey
        fields = ("name", "merchant", "owner_links")
        help_texts = {
            "merchant": "Leave empty for a platform key (may create merchants).",
        }


class ScopedApiKeyCreateForm(ApiKeyCreateForm):
    """For staff who are not superusers: a merchant is required, no owner links."""

    class Meta(ApiKeyCreateForm.Meta):
        fields = ("name", "merchant")
        help_texts = {
            "merchant": "The merchant the key acts for. Only superusers make "
            "platform keys.",
        }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["merchant"].required = True


@admin.register(ApiKey)
class ApiKeyAdmin(QuickRows, admin.ModelAdmin):
    list_display = (
        "name",
        "scope",
        "prefix",
        "owner_links_column",
        "last_used_at",
        "revoked_at",
    )
    list_select_related = ("merchant",)
    list_filter = (("merchant", MerchantOnlyFilter),)

    # One column says whose key it is (a platform key has no merchant), and
    # the owner-links flag gets a short header, and the creation time is on
    # the key's own page: with all of them the table ran past 1280 px and cut
    # the revoked column.
    @admin.display(description="merchant", ordering="merchant__slug")
    def scope(self, key: ApiKey) -> str:
        return "platform" if key.is_platform else str(key.merchant)

    @admin.display(description="owner links", boolean=True, ordering="owner_links")
    def owner_links_column(self, key: ApiKey) -> bool:
        return key.owner_links

    search_fields = ("name", "=prefix")
    actions = ("revoke_selected",)
    # The hash is never shown, and the full key only once, right after it is
    # made (apikey_create returns it; nothing can show it again).
    readonly_fields = (
        "owner_links",
        "prefix",
        "created_at",
        "last_used_at",
        "revoked_at",
    )

    def has_add_permission(self, request) -> bool:
        # Django's "add API key" alone is not enough: see the module docstring.
        return may_create_api_keys(request.user)

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = (
                ApiKeyCreateForm
                if request.user.is_superuser
                else ScopedApiKeyCreateForm
            )
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request, obj=None):
        if obj is None:
            if request.user.is_superuser:
                return ("name", "merchant", "owner_links")
            return ("name", "merchant")
        return ("name", "merchant", *self.readonly_fields)

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else ("name", "merchant", *self.readonly_fields)

    def save_model(self, request, obj, form, change) -> None:
        if change:
            return  # keys are immutable; revoke and make a new one instead
        merchant = form.cleaned_data["merchant"]
        superuser = request.user.is_superuser
        if not may_create_api_keys(request.user) or (
            merchant is None and not superuser
        ):
            # The form cannot get here without a merchant; a forged POST can.
            logger.warning(
                "api key creation refused user_id=%s merchant=%s",
                request.user.pk,
                merchant.slug if merchant else "(platform)",
            )
            raise PermissionDenied("Only superusers make platform keys.")
        key, full_key = apikey_create(
            name=form.cleaned_data["name"],
            merchant=merchant,
            owner_links=superuser and bool(form.cleaned_data.get("owner_links")),
        )
        logger.info(
            "api key created in the admin by user_id=%s prefix=%s merchant=%s "
            "owner_links=%s",
            request.user.pk,
            key.prefix,
            merchant.slug if merchant else "(platform)",
            key.owner_links,
        )
        # The admin logs and answers with obj: make it the row just saved.
        obj.pk, obj.prefix, obj.created_at = key.pk, key.prefix, key.created_at
        obj.owner_links = key.owner_links
        obj.full_key = full_key  # read once by response_add, never stored

    def response_add(self, request, obj, post_url_continue=None):
        """The full key, in this response's body only: never a message (messages
        live in a signed but readable cookie) nor a redirect that could be replayed."""
        response = TemplateResponse(
            request,
            "admin/endpoints/apikey/created.html",
            {
                **self.admin_site.each_context(request),
                "title": "API key created",
                "key": obj,
                "full_key": obj.full_key,
                "opts": self.opts,
            },
        )
        add_never_cache_headers(response)
        return response

    def has_delete_permission(self, request, obj=None) -> bool:
        # Revoke, never delete: the row is the history of who could call the API.
        return False

    @admin.action(description="Revoke selected keys", permissions=["change"])
    def revoke_selected(self, request, queryset) -> None:
        revoked = 0
        for key in queryset.filter(revoked_at__isnull=True):
            apikey_revoke(key=key)
            self.log_change(request, key, "Revoked the key.")
            revoked += 1
        self.message_user(request, f"Revoked {revoked} key(s).", messages.SUCCESS)

    @admin.display(boolean=True, description="platform")
    def is_platform(self, key: ApiKey) -> bool:
        return key.is_platform
