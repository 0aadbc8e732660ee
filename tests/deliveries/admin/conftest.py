"""The staff console's fixtures (tests/support/admin.py) for the deliveries side."""

from tests.support.admin import _fast_passwords, viewer_client  # noqa: F401
