"""What staff and ops read about the pipeline; nothing here sends or claims.

- ``held.py``     why a row is not moving (one answer for admin, portal, status).
- ``summary.py``  the pipeline in numbers: queue depth, dead letters, per minute.
- ``alerts.py``   pipeline health's alert list, read off the summary.
- ``latency.py``  publish-to-attempt and publish-to-success percentiles.
- ``stats.py``    per-endpoint statistics (success rate, latency).
- ``gauges.py``   the counts /metrics serves, computed by one dispatcher.
- ``metrics.py``  the /metrics view.
- ``charts.py``   the small SVG charts of the console and the portal.
"""
