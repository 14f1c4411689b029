"""`arbiter import fishtest`: a Fishtest mongodump made into an Arbiter instance.

Imports domain and storage (through its stores: it runs no SQL of its own and
touches no table), stats and protocol; never web, jobs, runtime or the
commands (`commands/fishtest_import.py` is its command)."""
