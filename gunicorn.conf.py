"""gunicorn's settings, read when `gunicorn relayproject.wsgi` starts in this folder:
the ones the package ships (relayproject/gunicorn_conf.py, which says why each).
"""

from relayproject.gunicorn_conf import *  # noqa: F403
