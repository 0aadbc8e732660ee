"""webhook-relay: signed webhooks from a Django app."""

__version__ = "0.1.0"
