"""The web inspector (``stalwart ui``): runs, steps, conversations, and the
runs waiting for a human, over any store, in a browser.

``serve(store_url)`` runs it with uvicorn; ``create_app(store)`` gives the
ASGI application (for tests, or to mount it in another app). It reads through
the Store interface and acts (signal, cancel, fork) through a Runner that never
executes a run. See ``docs/web.md``.
"""

from __future__ import annotations

from .app import create_app, serve

__all__ = ["create_app", "serve"]
