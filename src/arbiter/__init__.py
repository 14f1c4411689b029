"""Arbiter: a distributed engine-testing server and its volunteer worker."""

__version__ = "0.1.0"
