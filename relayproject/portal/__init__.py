"""The merchant portal: a face on the top floor, over both apps.

- ``urls.py``       every portal page; ``views/`` one module per area (auth and
                    one-time links, endpoints, secrets, deliveries, recover,
                    health, catalogue, notifications).
- ``access.py``     who may see and change what: a portal user's membership or a
                    portal-link session, scoped to one merchant.
- ``selectors.py``  the portal's reads of deliveries (pages, filters, windows).
- ``forms.py``      the endpoint and secret forms, errors beside their fields.
- ``present.py``    plain words and numbers for the templates.
- ``branding.py``   the platform's name and colours, and framing rules.
"""
