"""Background jobs of the primary: the scheduler (`scheduler.py`) and the one
table of what runs and how often (`table.py`).

Imports domain (the services a job calls); runtime builds the table and the
web layer's lifespan owns the scheduler's lifecycle."""

from arbiter.jobs.scheduler import JOB_THREADS, Job, JobScheduler, JobStatus
from arbiter.jobs.table import job_table

__all__ = ["JOB_THREADS", "Job", "JobScheduler", "JobStatus", "job_table"]
