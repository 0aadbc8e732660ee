"""The relay's admin in a project that owns its users: Django's stock user and
group admins are replaced by the guarded ones, a project's own are kept, and
the membership inline works whether the user model's admin can search or not.

The project with a user model of its own (auth's User swapped out, so it has
no admin at all) is tests/acceptance/test_wheel_in_host_project.py.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin import AdminSite
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.test import RequestFactory

from endpoints.admin.memberships import (
    GuardedGroupAdmin,
    GuardedUserAdmin,
    MembershipInline,
    guarded_admins_register,
)
from endpoints.models import Merchant


class ProjectUserAdmin(UserAdmin):
    pass


def test_djangos_own_user_and_group_admins_become_the_guarded_ones():
    site = AdminSite()
    site.register(User, UserAdmin)
    site.register(Group, GroupAdmin)
    guarded_admins_register(site)
    assert type(site.get_model_admin(User)) is GuardedUserAdmin
    assert type(site.get_model_admin(Group)) is GuardedGroupAdmin


def test_a_projects_own_user_admin_is_kept():
    site = AdminSite()
    site.register(User, ProjectUserAdmin)
    guarded_admins_register(site)
    assert type(site.get_model_admin(User)) is ProjectUserAdmin
    assert not site.is_registered(Group)


def test_a_site_with_no_user_admin_is_left_without_one():
    site = AdminSite()
    guarded_admins_register(site)
    assert not site.is_registered(User)


def test_memberships_name_users_by_raw_id_where_no_admin_searches_them():
    site = AdminSite()
    inline = MembershipInline(Merchant, site)
    assert inline.check() == []
    assert inline.get_autocomplete_fields(RequestFactory().get("/")) == ()


def test_memberships_pick_users_from_a_search_box_where_their_admin_searches():
    inline = MembershipInline(Merchant, admin.site)
    assert inline.get_autocomplete_fields(RequestFactory().get("/")) == ("user",)
