"""The bottom floor: helpers every app uses, importing no app.

clock (the one clock), ids, rowsql (raw SQL helpers), pagination, problems
(problem+json), strictquery, jsonlimits, limits, logs, tracing, proxies,
requestid, sessions (idle timeout), gunicorn_logging.
"""
