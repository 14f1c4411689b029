"""The volunteer worker: builds engines from git, plays paired games with our
own match runner (`match/`), and reports to the server over the worker
protocol. Imports only `arbiter.protocol` and `arbiter.stats` of ours, so it
installs without the server's dependencies (worker/pyproject.toml).

Modules: cli/arguments (the commands), config (the INI file and flags),
client (the protocol), loop (the main loop), task (one task), engines and
gitsource (builds), books, nets, bench, spsa, heartbeat, control, status
(the status line and logs), state (status.json, `arbiter worker status`),
update (self-update), service (`arbiter worker install-service`), demo and
sample_engine (`arbiter demo`). This package is deliberately empty:
`arbiter serve` imports `arguments` and must not load the rest.
"""
