"""A small Django project that is not the relay's: its own app (shop: a user
model, orders, their admin) with the relay's apps installed from the wheel.

tests/acceptance/test_wheel_in_host_project.py copies it into a temporary
folder and runs it in a fresh virtualenv; nothing here is imported by the
suite itself.
"""
