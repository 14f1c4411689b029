"""HTTP: the ASGI app and its lifespan (`app.py`), the one route table
(`routes.py`), the worker API (`worker_api.py`, served apart from the page
stack by `worker_calls.py`), the JSON API, the pages (`ui/`, `templates/`,
`static/`), middleware, sessions, and the one place errors become HTTP
(`errors.py`).

Imports runtime (the process's state and settings), jobs, domain, storage,
stats and protocol; never the commands. Blocking work runs in the threadpool.
"""
