"""The `arbiter` commands that run the server or touch its data: `serve`, the
operator's `db`, `users`, `books` and `worker-package` (`admin.py`) and
`import fishtest` (`fishtest_import.py`). Thin: each parses its arguments
into settings, opens what it needs through `arbiter.runtime` and calls one
service. `arbiter.cli` dispatches to them (and to the worker's own commands).

The top of the layering: may import anything of ours; nothing imports it but
`arbiter.cli`.
"""
