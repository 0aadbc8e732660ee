"""The staff console's fixtures (tests/support/admin.py) for the endpoints side."""

from tests.support.admin import _fast_passwords, viewer_client  # noqa: F401
