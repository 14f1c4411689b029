"""Runs and their tasks: submission and lifecycle, scheduling, result ingestion.

The primary keeps every unfinished run in memory (`registry`); each change is
committed to storage before the caller is answered, and only then applied to
memory, so a crash loses nothing acknowledged and memory never runs ahead of
the database.
"""
