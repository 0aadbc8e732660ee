"""MkDocs hook: the pages made from the code and the repository, at build time.

- reference/api.md: the OpenAPI document the server serves, as Markdown
  (relayproject/lib/openapi_markdown.py);
- reference/settings.md: every setting with its default from the code and
  its meaning (relayproject/lib/settings_reference.py);
- getting-started.md: the README's five-minute tour, the same text a test
  runs (tests/acceptance/test_readme_tour.py);
- client.md: the client library's own README.

Made at every build, none can drift from what it describes. Reading the
OpenAPI document loads Django with the development settings; nothing is
served and no database is touched.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
TOUR_START = "<!-- tour:start -->"
TOUR_END = "<!-- tour:end -->"

SETTINGS_INTRO = """\
# Settings

Every setting, with its default as the code has it (this page is generated
from `relayproject/lib/appsettings.py`, `relayproject/settings.py` and the
meanings in `relayproject/lib/settings_meanings.py` when the docs are built).

- **relay** settings are read by the apps. The standalone relay (`make run`,
  `webhook-relay`, the container image) reads each from the environment
  variable of its name; in [a Django project of your own](../install/django-project.md)
  set it as a Django setting of the same name, or leave it at its default.
- **process** settings are read from the environment by the standalone
  relay's own Django settings, or by the command that starts a process; in
  a project of your own, your settings decide them.

Environment variables are read with django-environ: booleans as
`true`/`false`, lists comma-separated, a database or mail server as a URL.

"""


def _django() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relayproject.settings")
    # The standalone settings refuse the development SECRET_KEY without DEBUG.
    os.environ.setdefault("DEBUG", "true")
    import django

    django.setup()


def api_page() -> str:
    from relayproject.api import api
    from relayproject.lib.openapi_markdown import openapi_markdown

    return openapi_markdown(api.get_openapi_schema())


def settings_page() -> str:
    from relayproject.lib.settings_reference import settings_markdown

    return SETTINGS_INTRO + settings_markdown()


def tour_page() -> str:
    readme = (ROOT / "README.md").read_text()
    start, end = readme.index(TOUR_START), readme.index(TOUR_END)
    tour = readme[start + len(TOUR_START) : end].strip()
    # The README's heading levels, one up: the page's own title is the tour's.
    tour = re.sub(r"^##(#*) ", r"#\1 ", tour, flags=re.MULTILINE)
    # Its links into the docs, from the page's place among them.
    return tour.replace("](docs/pages/", "](") + "\n"


def client_page() -> str:
    return (ROOT / "client" / "README.md").read_text()


GENERATED = {
    "reference/api.md": api_page,
    "reference/settings.md": settings_page,
    "getting-started.md": tour_page,
    "client.md": client_page,
}


def on_files(files: Files, config) -> Files:
    _django()
    for uri, make in GENERATED.items():
        files.append(File.generated(config, uri, content=make()))
    return files
