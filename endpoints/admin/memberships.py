"""Merchant memberships in the admin: who may grant them, and the log of each grant.

A membership opens a merchant's signing secrets in the portal, so granting one
is its own permission (`endpoints.grant_membership`, or superuser), not
"change merchant" or "change membership"; nobody grants or changes their own;
every grant, change and removal gets an admin log entry and a log line.
Users and groups are guarded the same way: only superusers give admin rights,
and only superusers change the password or email of a user who holds any.
"""

from __future__ import annotations

import logging

from django import forms
from django.contrib import admin
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.core.exceptions import PermissionDenied

from endpoints.models import Membership

logger = logging.getLogger(__name__)

GRANT_PERMISSION = "endpoints.grant_membership"


def may_grant_memberships(user) -> bool:
    """A membership opens a merchant's secrets: only superusers and holders of
    its own permission may change them (not "change merchant/membership")."""
    return user.is_active and (user.is_superuser or user.has_perm(GRANT_PERMISSION))


class MembershipFormSet(forms.BaseInlineFormSet):
    """Nobody, superusers included, grants or changes a membership of their own."""

    acting_user = None  # set per request by MembershipInline.get_formset

    def clean(self) -> None:
        super().clean()
        for form in self.forms:
            if not form.has_changed() or not hasattr(form, "cleaned_data"):
                continue
            user = form.cleaned_data.get("user")
            if user and user.pk == self.acting_user.pk:
                logger.warning(
                    "membership self-grant refused user_id=%s merchant_id=%s",
                    self.acting_user.pk,
                    self.instance.pk,
                )
                form.add_error(
                    "user" if "user" in form.fields else None,
                    "You cannot grant or change a membership of your own.",
                )


class MembershipInline(admin.TabularInline):
    model = Membership
    formset = MembershipFormSet
    extra = 0
    # A raw user id only where the user model's admin cannot search (another
    # project's model, registered without search_fields or not at all).
    raw_id_fields = ("user",)

    def get_autocomplete_fields(self, request) -> tuple[str, ...]:
        # Picked by name from a search box, not typed as a raw user id.
        users = get_user_model()
        searchable = self.admin_site.is_registered(users) and bool(
            self.admin_site.get_model_admin(users).search_fields
        )
        return ("user",) if searchable else ()

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("user")

    def get_formset(self, request, obj=None, **kwargs):
        formset = super().get_formset(request, obj, **kwargs)
        formset.acting_user = request.user
        return formset

    def has_add_permission(self, request, obj=None) -> bool:
        return may_grant_memberships(request.user)

    def has_change_permission(self, request, obj=None) -> bool:
        return may_grant_memberships(request.user)

    def has_delete_permission(self, request, obj=None) -> bool:
        return may_grant_memberships(request.user)

    def has_view_permission(self, request, obj=None) -> bool:
        return super().has_view_permission(request, obj) or may_grant_memberships(
            request.user
        )


class MembershipGrantsLogged:
    """For the merchant admin that carries MembershipInline."""

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        if (
            request.method == "POST"
            and any(name.startswith("membership_set-") for name in request.POST)
            and not may_grant_memberships(request.user)
        ):
            # The inline is not there for them, so Django would drop these
            # fields silently; say in the log that someone tried.
            logger.warning(
                "membership change refused (no grant_membership permission) "
                "user_id=%s merchant_id=%s",
                request.user.pk,
                object_id,
            )
        return super().changeform_view(request, object_id, form_url, extra_context)

    def save_formset(self, request, form, formset, change) -> None:
        super().save_formset(request, form, formset, change)
        if formset.model is not Membership:
            return
        # Each membership change gets its own admin log entry and log line,
        # beside the merchant's, so "who gave whom access" is one query.
        flags = {"added": ADDITION, "changed": CHANGE, "removed": DELETION}
        changes = [
            *(("added", m) for m in formset.new_objects),
            *(("changed", m) for m, _fields in formset.changed_objects),
            *(("removed", m) for m in formset.deleted_objects),
        ]
        for what, membership in changes:
            LogEntry.objects.log_actions(
                user_id=request.user.pk,
                queryset=[membership],
                action_flag=flags[what],
                change_message=f"Membership {what}: {membership}",
                single_object=True,
            )
            logger.info(
                "membership %s by user_id=%s: user_id=%s merchant_id=%s role=%s",
                what,
                request.user.pk,
                membership.user_id,
                membership.merchant_id,
                membership.role,
            )


def holds_rights(user) -> bool:
    """Staff or superuser, any permission or group, or any merchant membership:
    whoever can sign in as this user gets more than a bare account."""
    return (
        user.is_staff
        or user.is_superuser
        or Membership.objects.filter(user=user).exists()
        or user.user_permissions.exists()
        or user.groups.exists()
    )


def guards(acting, target) -> bool:
    """True when `acting` may not change `target`'s password, email or rights."""
    return not acting.is_superuser and holds_rights(target)


class GuardedUserAdmin(UserAdmin):
    """Only superusers hand out admin rights: others cannot make anyone (themselves
    included) staff or superuser, nor give permissions or groups.

    Nor can they change the password or email of a user who holds any rights
    (staff, a permission, a group, a merchant membership): resetting it would
    let them sign in as that user, a portal owner or a grant_membership holder.
    """

    def get_readonly_fields(self, request, obj=None):
        fields = tuple(super().get_readonly_fields(request, obj))
        if request.user.is_superuser:
            return fields
        fields = (*fields, "is_staff", "is_superuser", "groups", "user_permissions")
        if obj is not None and guards(request.user, obj):
            fields = (*fields, "email")
        return fields

    def has_change_permission(self, request, obj=None) -> bool:
        if obj is not None and obj.is_superuser and not request.user.is_superuser:
            return False
        return super().has_change_permission(request, obj)

    def user_change_password(self, request, id, form_url=""):
        target = self.get_object(request, id)
        if target is not None and guards(request.user, target):
            logger.warning(
                "password change refused (user holds rights; superusers only) "
                "by user_id=%s for user_id=%s method=%s",
                request.user.pk,
                target.pk,
                request.method,
            )
            raise PermissionDenied(
                "Only superusers change the password of a user with staff "
                "rights, permissions, groups or merchant memberships."
            )
        return super().user_change_password(request, id, form_url)


class GuardedGroupAdmin(GroupAdmin):
    """A group's permissions are admin rights too: superusers only."""

    def get_readonly_fields(self, request, obj=None):
        fields = tuple(super().get_readonly_fields(request, obj))
        return fields if request.user.is_superuser else (*fields, "permissions")


def guarded_admins_register(site: admin.AdminSite) -> None:
    """The guarded admins in place of Django's own for users and groups. A
    project that registers admins of its own (or swaps the user model out,
    so auth's User has none) keeps them: it owns its users."""
    for model, guarded, stock in (
        (User, GuardedUserAdmin, UserAdmin),
        (Group, GuardedGroupAdmin, GroupAdmin),
    ):
        if site.is_registered(model) and type(site.get_model_admin(model)) is stock:
            site.unregister(model)
            site.register(model, guarded)


guarded_admins_register(admin.site)
