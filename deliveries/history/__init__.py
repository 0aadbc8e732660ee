"""Deliveries' history on disk: day partitions made ahead, old days dropped.

- ``partitions.py``  the history tables' day partitions on PostgreSQL.
- ``retention.py``   what ``prune_deliveries`` drops, and how claims keep moving.
"""
