"""Run views keep the reference's shape whatever a run was stored under."""

from arbiter.domain.runs.documents import RUN_VERSION, new_run_record, run_view
from arbiter.storage.records import evolve
from arbiter.storage.run_spec import RunSpec

SPEC = RunSpec(tc="10+0.1", num_games=100)


def test_the_version_served_is_the_shape_served() -> None:
    run = new_run_record("a" * 24, "alice", SPEC, 0.0)
    assert run.version == RUN_VERSION == 24
    older = evolve(run, version=1)  # a run stored before the views took the reference's shape
    assert run_view(older)["version"] == 24
