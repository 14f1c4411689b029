"""The services, on plain values: accounts (`accounts/`), the audit log
(`actions.py`), runs and their tasks (`runs/`), files the workers fetch or send
(`files/`), reading submitted code (`repos/`), webhooks, follows, worker
blocks, and the validation of what users submit (`run_args.py`).

Imports storage (through its interfaces), stats and protocol; never the web
layer, jobs or runtime. A domain function takes plain values, never a request.
"""
