"""The HTTP edge's shared parts: what the API (``stalwart serve``) and the
web inspector (``stalwart ui``) both need.

:mod:`.access` holds the checks every request passes (tokens, hosts, origins,
security headers); :mod:`.serving` runs an app under uvicorn with the
deadlines and the connection limit that hold against slow clients. Neither
knows a route of either app.
"""

__all__: list[str] = []
