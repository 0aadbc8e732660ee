"""The deliveries side of the staff console (Django admin), in reading order.

- model_admins: events, deliveries, attempts and dead letters, with replay.
- views: the pages that are not a model list: replay and retry-now forms,
  the pipeline page, the dead-letter analysis.
- columns: how each list column renders a row.

Importing the package registers every ModelAdmin, which is all Django's
admin autodiscovery needs.
"""

from deliveries.admin import model_admins  # noqa: F401 - registers them
