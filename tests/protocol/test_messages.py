"""Worker API bodies: every constraint of reference 1.1/1.2, with a good and a
bad example, and the error message naming the field."""

import copy
from typing import Any

import pytest

from arbiter.protocol.messages import (
    SUPPORTED_ARCHS,
    WORKER_ARCHS,
    BeatRequest,
    BodyError,
    FailedTaskRequest,
    RequestSpsaRequest,
    RequestTaskRequest,
    StopRunRequest,
    UpdateTaskRequest,
    UploadPgnRequest,
    VersionRequest,
    WorkerInfo,
    WorkerLogRequest,
    check_task_reference,
    decode_body,
)

RUN_ID = "65a1f3c2b4d5e6f708192a3b"


def worker_info(**changes: Any) -> dict[str, Any]:
    info: dict[str, Any] = {
        "uname": "Linux 6.1.0-18-amd64",
        "architecture": ["64bit", "ELF"],
        "concurrency": 8,
        "max_memory": 16000,
        "min_threads": 1,
        "username": "alice",
        "version": 325,
        "python_version": [3, 11, 2],
        "gcc_version": [12, 2, 0],
        "compiler": "g++",
        "unique_key": "a1b2c3d4-1234-5678-9abc-def012345678",
        "modified": False,
        "worker_arch": "x86-64-avx2",
        "ARCH": "?",
        "nps": 0.0,
        "near_github_api_limit": False,
    }
    info.update(changes)
    return info


def stats(**changes: Any) -> dict[str, Any]:
    value: dict[str, Any] = {
        "wins": 10,
        "losses": 8,
        "draws": 14,
        "crashes": 0,
        "time_losses": 0,
        "pentanomial": [1, 3, 6, 4, 2],
    }
    value.update(changes)
    return value


def task_body(**extra: Any) -> dict[str, Any]:
    return {
        "password": "secret",
        "worker_info": worker_info(),
        "run_id": RUN_ID,
        "task_id": 3,
        **extra,
    }


def error_of(payload: dict[str, Any], kind: type[object]) -> str:
    with pytest.raises(BodyError) as caught:
        decode_body(payload, kind)
    return str(caught.value)


def test_arch_list_is_complete() -> None:
    assert len(SUPPORTED_ARCHS) >= 29
    assert len(set(SUPPORTED_ARCHS)) == len(SUPPORTED_ARCHS)
    assert (*SUPPORTED_ARCHS, "unknown") == WORKER_ARCHS
    assert {"x86-64-avx512icl", "apple-silicon", "riscv64", "loongarch64-lasx"} <= set(
        SUPPORTED_ARCHS
    )


def test_full_worker_info_decodes() -> None:
    body = decode_body({"password": "p", "worker_info": worker_info()}, RequestTaskRequest)
    assert isinstance(body.worker_info, WorkerInfo)
    assert body.worker_info.architecture == ("64bit", "ELF")
    assert body.worker_info.python_version == (3, 11, 2)
    assert body.worker_info.nps == 0.0


def test_unknown_fields_are_allowed() -> None:
    payload = {"password": "p", "worker_info": worker_info(new_thing=1), "extra": True}
    assert decode_body(payload, RequestTaskRequest).password == "p"


# (field, good value, bad value, words the error must contain)
WORKER_INFO_CASES: list[tuple[str, Any, Any, str]] = [
    ("uname", "Darwin 23.0 (colab)", 5, "expected `str`"),
    ("architecture", ["32bit", "WindowsPE"], ["64bit"], "length 2"),
    ("architecture", ["32bit", "WindowsPE"], ["64bit", 1], "expected `str`"),
    ("concurrency", 1, 0, ">= 1"),
    ("concurrency", 1, 2.0, "expected `int`"),
    ("max_memory", 0, -1, ">= 0"),
    ("min_threads", 1, 0, ">= 1"),
    ("username", "Ab9", "a", "regex"),
    ("username", "Ab9", "bob!", "regex"),
    ("username", "Ab9", "bob\n", "regex"),
    ("version", 0, -1, ">= 0"),
    ("python_version", [3, 12, 0], [3, 12], "length 3"),
    ("python_version", [3, 12, 0], [3, 12, "0"], "expected `int`"),
    ("gcc_version", [16, 0, 0], [16, 0, 0, 1], "length 3"),
    ("compiler", "clang++", "gcc", "invalid enum value 'gcc'"),
    ("unique_key", "Ab-1234-5678-9abc-def012345678", "a-1234-5678-9abc-def012345678", "regex"),
    ("unique_key", "Ab-1234-5678-9abc-def012345678", "abc-1234-5678-9ABC-def012345678", "regex"),
    (
        "unique_key",
        "Ab-1234-5678-9abc-def012345678",
        "abcdefghi-1234-5678-9abc-def012345678",
        "regex",
    ),
    ("modified", True, 1, "expected `bool`"),
    ("worker_arch", "unknown", "x86-64-avx9000", "invalid enum value 'x86-64-avx9000'"),
    ("worker_arch", "apple-silicon", "", "invalid enum value"),
    ("ARCH", "x86-64-avx2 BMI2", None, "expected `str`"),
    ("nps", 1234567.5, -0.5, ">= 0"),
    ("nps", 1234567, True, "expected `float`"),
    ("nps", 1234567, float("inf"), "<= "),
    ("near_github_api_limit", True, "no", "expected `bool`"),
]


@pytest.mark.parametrize(("field", "good", "bad", "words"), WORKER_INFO_CASES)
def test_worker_info_constraints(field: str, good: Any, bad: Any, words: str) -> None:
    ok = {"password": "p", "worker_info": worker_info(**{field: good})}
    assert decode_body(ok, RequestTaskRequest).worker_info.username
    wrong = {"password": "p", "worker_info": worker_info(**{field: bad})}
    message = error_of(wrong, RequestTaskRequest)
    assert message.startswith(f"worker_info.{field}")
    assert words in message


@pytest.mark.parametrize("arch", WORKER_ARCHS)
def test_every_listed_arch_is_accepted(arch: str) -> None:
    payload = {"password": "p", "worker_info": worker_info(worker_arch=arch)}
    assert decode_body(payload, RequestTaskRequest).worker_info.worker_arch == arch


@pytest.mark.parametrize("field", sorted(worker_info()))
def test_every_worker_info_field_is_mandatory(field: str) -> None:
    info = worker_info()
    del info[field]
    message = error_of({"password": "p", "worker_info": info}, RequestTaskRequest)
    assert message == f"worker_info.{field}: missing required field"


def test_version_request_keeps_the_lax_schema() -> None:
    body = decode_body({"password": "p", "worker_info": {"username": "bob"}}, VersionRequest)
    assert body.worker_info.username == "bob"
    message = error_of({"password": "p", "worker_info": {"username": "b"}}, VersionRequest)
    assert message.startswith("worker_info.username: ")


STATS_CASES: list[tuple[str, Any, Any, str]] = [
    ("wins", 0, -1, ">= 0"),
    ("losses", 0, -1, ">= 0"),
    ("draws", 0, 1.5, "expected `int`"),
    ("crashes", 0, -1, ">= 0"),
    ("time_losses", 0, -1, ">= 0"),
    ("time_losses", 0, 2**40, "<= "),
    ("pentanomial", [0, 0, 0, 0, 0], [0, 0, 0, 0], "length >= 5"),
    ("pentanomial", [0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0], "length <= 5"),
]


@pytest.mark.parametrize(("field", "good", "bad", "words"), STATS_CASES)
def test_stats_constraints(field: str, good: Any, bad: Any, words: str) -> None:
    ok = decode_body(task_body(stats=stats(**{field: good})), UpdateTaskRequest)
    assert ok.spsa is None
    message = error_of(task_body(stats=stats(**{field: bad})), UpdateTaskRequest)
    assert message.startswith(f"stats.{field}: ")
    assert words in message


def test_negative_pentanomial_entry_names_its_index() -> None:
    message = error_of(task_body(stats=stats(pentanomial=[0, 0, -1, 0, 0])), UpdateTaskRequest)
    assert message == "stats.pentanomial.2: expected `int` >= 0"


def test_stats_consistency_is_not_a_schema_matter() -> None:
    # Inconsistent numbers are the result service's 200 + error, not a 400.
    body = decode_body(task_body(stats=stats(wins=1000)), UpdateTaskRequest)
    assert body.stats.wins == 1000


def spsa(**changes: Any) -> dict[str, Any]:
    value: dict[str, Any] = {"wins": 3, "losses": 2, "draws": 5, "num_games": 10, "sig": 123}
    value.update(changes)
    return value


def test_spsa_result_decodes() -> None:
    body = decode_body(task_body(stats=stats(), spsa=spsa()), UpdateTaskRequest)
    assert body.spsa is not None
    assert body.spsa.num_games == 10
    assert body.spsa.sig == 123


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"num_games": 9, "draws": 4}, "spsa: num_games must be even"),
        ({"draws": 7}, "spsa: wins + losses + draws must equal num_games"),
        ({"wins": -1}, "spsa.wins: expected `int` >= 0"),
        ({"sig": -1}, "spsa.sig: expected `int` >= 0"),
        ({"sig": 2**32}, "spsa.sig: expected `int` <= 4294967295"),
    ],
)
def test_spsa_result_constraints(changes: dict[str, Any], message: str) -> None:
    assert error_of(task_body(stats=stats(), spsa=spsa(**changes)), UpdateTaskRequest) == message


def test_spsa_result_missing_field() -> None:
    value = spsa()
    del value["sig"]
    message = error_of(task_body(stats=stats(), spsa=value), UpdateTaskRequest)
    assert message == "spsa.sig: missing required field"


TASK_KINDS: list[type[object]] = [
    BeatRequest,
    RequestSpsaRequest,
    FailedTaskRequest,
    StopRunRequest,
    UploadPgnRequest,
    UpdateTaskRequest,
]


ENDPOINT_FIELDS: dict[type[object], dict[str, Any]] = {
    StopRunRequest: {"message": "wrong bench"},
    UploadPgnRequest: {"pgn": "H4sIAAAAAAAA"},
    UpdateTaskRequest: {"stats": stats()},
}


def complete(kind: type[object], **changes: Any) -> dict[str, Any]:
    body = task_body(**ENDPOINT_FIELDS.get(kind, {}))
    body.update(changes)
    return body


@pytest.mark.parametrize("kind", TASK_KINDS)
def test_task_bodies_decode(kind: type[object]) -> None:
    body = decode_body(complete(kind), kind)
    assert getattr(body, "run_id") == RUN_ID  # noqa: B009 (kind is generic here)
    assert getattr(body, "task_id") == 3  # noqa: B009


@pytest.mark.parametrize("kind", TASK_KINDS)
@pytest.mark.parametrize(
    ("field", "bad", "words"),
    [
        ("run_id", "65A1F3C2B4D5E6F708192A3B", "regex"),
        ("run_id", "65a1f3c2b4d5e6f708192a3", "regex"),
        ("run_id", "65a1f3c2b4d5e6f708192a3bc", "regex"),
        ("run_id", 12, "expected `str`"),
        ("task_id", -1, ">= 0"),
        ("task_id", "3", "expected `int`"),
    ],
)
def test_task_ids_constraints(kind: type[object], field: str, bad: Any, words: str) -> None:
    message = error_of(complete(kind, **{field: bad}), kind)
    assert message.startswith(f"{field}: ")
    assert words in message


@pytest.mark.parametrize("kind", TASK_KINDS)
@pytest.mark.parametrize("field", ["run_id", "task_id", "password", "worker_info"])
def test_task_ids_and_credentials_are_mandatory(kind: type[object], field: str) -> None:
    body = complete(kind)
    del body[field]
    assert error_of(body, kind) == f"{field}: missing required field"


@pytest.mark.parametrize(
    ("kind", "field"),
    [
        (UpdateTaskRequest, "stats"),
        (StopRunRequest, "message"),
        (UploadPgnRequest, "pgn"),
    ],
)
def test_endpoint_fields_are_mandatory(kind: type[object], field: str) -> None:
    body = complete(kind)
    del body[field]
    assert error_of(body, kind) == f"{field}: missing required field"


def test_failed_task_message_is_optional() -> None:
    assert decode_body(complete(FailedTaskRequest), FailedTaskRequest).message == ""
    body = decode_body(complete(FailedTaskRequest, message="boom"), FailedTaskRequest)
    assert body.message == "boom"
    bad = complete(FailedTaskRequest, message=["boom"])
    assert error_of(bad, FailedTaskRequest).startswith("message: expected `str`")


def test_upload_pgn_must_be_text() -> None:
    message = error_of(complete(UploadPgnRequest, pgn=5), UploadPgnRequest)
    assert message == "pgn: expected `str`, got `int`"


def test_full_worker_info_is_required_beyond_request_version() -> None:
    body = complete(BeatRequest)
    body["worker_info"] = {"username": "alice"}
    assert error_of(body, BeatRequest) == "worker_info.uname: missing required field"


def log_body(**extra: Any) -> dict[str, Any]:
    return {"password": "p", "worker_info": worker_info(), "message": "hello", **extra}


def test_worker_log_without_task() -> None:
    body = decode_body(log_body(), WorkerLogRequest)
    assert (body.message, body.run_id, body.task_id) == ("hello", None, None)


def test_worker_log_with_task() -> None:
    body = decode_body(log_body(run_id=RUN_ID, task_id=0), WorkerLogRequest)
    assert (body.run_id, body.task_id) == (RUN_ID, 0)


def test_worker_log_run_id_requires_task_id() -> None:
    message = error_of(log_body(run_id=RUN_ID), WorkerLogRequest)
    assert message == "task_id: required when run_id is given"


def test_worker_log_task_id_requires_run_id() -> None:
    message = error_of(log_body(task_id=1), WorkerLogRequest)
    assert message == "run_id: required when task_id is given"


def test_worker_log_message_is_mandatory() -> None:
    body = log_body()
    del body["message"]
    assert error_of(body, WorkerLogRequest) == "message: missing required field"


def test_worker_log_bad_run_id() -> None:
    assert error_of(log_body(run_id="nope", task_id=1), WorkerLogRequest).startswith("run_id: ")


@pytest.mark.parametrize(
    ("run_id", "task_id", "message"),
    [
        (None, None, None),
        (RUN_ID, 0, None),
        (RUN_ID, None, "task_id: required when run_id is given"),
        (None, 0, "run_id: required when task_id is given"),
    ],
)
def test_check_task_reference(run_id: str | None, task_id: int | None, message: str | None) -> None:
    if message is None:
        check_task_reference(run_id, task_id)
    else:
        with pytest.raises(BodyError, match=message):
            check_task_reference(run_id, task_id)


def test_decode_does_not_mutate_payload() -> None:
    payload = complete(UpdateTaskRequest)
    before = copy.deepcopy(payload)
    decode_body(payload, UpdateTaskRequest)
    assert payload == before
