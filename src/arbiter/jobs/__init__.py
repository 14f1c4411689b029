"""Background jobs of the primary: the scheduler (`scheduler.py`) and the one
table of what runs and how often (`table.py`). Imports point jobs -> domain;
the web layer builds the table and owns the scheduler's lifecycle."""

from arbiter.jobs.scheduler import JOB_THREADS, Job, JobScheduler, JobStatus
from arbiter.jobs.table import job_table

__all__ = ["JOB_THREADS", "Job", "JobScheduler", "JobStatus", "job_table"]
