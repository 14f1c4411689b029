"""The server process's room: settings (`settings.py`, from the environment and
the command line), start-up (`bootstrap.py`: taking the primary's lease,
opening and migrating the database, building every service and the jobs) and
the per-process state the web layer serves from (`state.py`).

Imports the layers below it (jobs, domain, storage, and the pure protocol);
the web layer and the commands import it, never the other way.
"""
