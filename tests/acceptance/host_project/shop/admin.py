from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from shop.models import Order, User

admin.site.register(User, UserAdmin)


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    list_display = ("id", "customer", "total_cents")
