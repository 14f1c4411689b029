"""The new test form as plain data: presets, form values <-> submission, error placement.

Pure functions, no request: the handlers in `new_run.py` call them. The form
posts flat fields; `submission()` turns them into the mapping
`RunLifecycle.submit` validates (the same one the runs API takes), so the
rules live in one place (`domain.run_args`). A chosen preset wins over the
fields it sets, unless it is "custom": this is what makes the form work
without JavaScript (`static/new_run.js` only fills the fields in to show it).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from arbiter.domain.run_args import DEFAULT_BOOK, DEFAULT_BOOK_DEPTH, DEFAULT_GAMES, option_value
from arbiter.stats.spsa import DEFAULT_A_RATIO, DEFAULT_ALPHA, DEFAULT_GAMMA
from arbiter.storage.run_spec import RunSpec

CUSTOM = "custom"


@dataclass(frozen=True, slots=True)
class TimePreset:
    key: str
    label: str
    tc: str
    threads: int
    hash_mib: int


@dataclass(frozen=True, slots=True)
class BoundsPreset:
    key: str
    label: str
    elo0: float
    elo1: float


TIME_PRESETS = (
    TimePreset("stc", "STC 10+0.1", "10+0.1", 1, 16),
    TimePreset("ltc", "LTC 60+0.6", "60+0.6", 1, 64),
    TimePreset("stc_smp", "STC SMP 5+0.05, 8 threads", "5+0.05", 8, 64),
    TimePreset("ltc_smp", "LTC SMP 20+0.2, 8 threads", "20+0.2", 8, 256),
    TimePreset("vltc", "VLTC 180+1.8", "180+1.8", 1, 192),
    TimePreset("vltc_smp", "VLTC SMP 60+0.6, 8 threads", "60+0.6", 8, 512),
)
BOUNDS_PRESETS = (
    BoundsPreset("stc", "Standard STC ⟨0, 2⟩", 0.0, 2.0),
    BoundsPreset("ltc", "Standard LTC ⟨0.5, 2.5⟩", 0.5, 2.5),
    BoundsPreset("nonreg", "Non-regression ⟨−1.75, 0.25⟩", -1.75, 0.25),
)
TIME_BY_KEY = {preset.key: preset for preset in TIME_PRESETS}
BOUNDS_BY_KEY = {preset.key: preset for preset in BOUNDS_PRESETS}
STOP_RULES = (("sprt", "SPRT"), ("spsa", "SPSA"), ("games", "Fixed number of games"))
COMPILERS = (("", "any"), ("g++", "g++"), ("clang++", "clang++"))
ELO_MODELS = (("normalized", "normalized"), ("logistic", "logistic"), ("BayesElo", "BayesElo"))

# Flat form fields, with the value a new form starts with.
TEXT_FIELDS: dict[str, str] = {
    "tests_repo": "",
    "new_tag": "",
    "base_tag": "master",
    "new_signature": "",
    "base_signature": "",
    "time_preset": "stc",
    "tc": "10+0.1",
    "new_tc": "",
    "threads": "1",
    "new_options": "Hash=16",
    "base_options": "Hash=16",
    "book": DEFAULT_BOOK,
    "book_depth": str(DEFAULT_BOOK_DEPTH),
    "stop_rule": "sprt",
    "bounds": "stc",
    "elo0": "0",
    "elo1": "2",
    "alpha": "0.05",
    "beta": "0.05",
    "elo_model": "normalized",
    "num_games": str(DEFAULT_GAMES),
    "spsa_A": f"{DEFAULT_A_RATIO:g}",
    "spsa_alpha": f"{DEFAULT_ALPHA:g}",
    "spsa_gamma": f"{DEFAULT_GAMMA:g}",
    "spsa_raw_params": "",
    "priority": "0",
    "throughput": "100",
    "arch_filter": "",
    "compiler": "",
    "info": "",
}
CHECKBOXES = ("time_odds", "auto_purge", "disable_adjudication")

# Where a domain error's field is shown on the form (domain name -> form field).
ERROR_FIELDS = {
    "sprt": "bounds",
    "sprt.elo0": "elo0",
    "sprt.elo1": "elo1",
    "sprt.alpha": "alpha",
    "sprt.beta": "beta",
    "sprt.elo_model": "elo_model",
    "spsa": "stop_rule",
    "spsa.A": "spsa_A",
    "spsa.alpha": "spsa_alpha",
    "spsa.gamma": "spsa_gamma",
    "spsa.raw_params": "spsa_raw_params",
    "adjudication": "disable_adjudication",
    "ref": "new_tag",
}
FORM_FIELDS = frozenset(TEXT_FIELDS) | frozenset(CHECKBOXES)


def blank_values(tests_repo: str = "", book: str = DEFAULT_BOOK) -> dict[str, Any]:
    """A new form: STC, standard STC bounds, the user's default repository, and
    the book new runs get by default."""
    values: dict[str, Any] = {**TEXT_FIELDS, "tests_repo": tests_repo, "book": book}
    values.update(dict.fromkeys(CHECKBOXES, False))
    return values


def posted_values(form: Mapping[str, str]) -> dict[str, Any]:
    """The form as posted, for showing it again (unknown keys dropped)."""
    values: dict[str, Any] = {name: form.get(name, "") for name in TEXT_FIELDS}
    values.update({name: form.get(name) == "on" for name in CHECKBOXES})
    return values


# Run arguments that are the form field of the same name, as text, both ways.
PLAIN_RUN_ARGS = (
    "new_tag",
    "base_tag",
    "new_signature",
    "base_signature",
    "tc",
    "threads",
    "new_options",
    "base_options",
    "book",
    "book_depth",
    "priority",
    "throughput",
    "arch_filter",
    "compiler",
)


def error_field(domain_field: str) -> str:
    """The form field that shows an error about `domain_field` ("form" if none)."""
    field = ERROR_FIELDS.get(domain_field, domain_field)
    return field if field in FORM_FIELDS else "form"


def submission(values: Mapping[str, Any]) -> dict[str, object]:
    """The mapping `RunLifecycle.submit` takes, from posted values (presets applied)."""
    values = with_presets(values)
    raw: dict[str, object] = {
        name: str(values[name]).strip() for name in ("tests_repo", *PLAIN_RUN_ARGS)
    }
    raw["info"] = str(values["info"])
    raw["new_tc"] = str(values["new_tc"]).strip() if values["time_odds"] else ""
    raw["auto_purge"] = bool(values["auto_purge"])
    raw["adjudication"] = not values["disable_adjudication"]
    rule = values["stop_rule"]
    if rule == "sprt":  # no num_games: an SPRT runs until decided, under the domain's cap
        raw["sprt"] = {
            key: str(values[key]).strip() for key in ("elo0", "elo1", "alpha", "beta", "elo_model")
        }
    else:
        raw["num_games"] = str(values["num_games"]).strip()
    if rule == "spsa":
        raw["spsa"] = {
            "A": str(values["spsa_A"]).strip(),
            "alpha": str(values["spsa_alpha"]).strip(),
            "gamma": str(values["spsa_gamma"]).strip(),
            "raw_params": str(values["spsa_raw_params"]),
        }
    return raw


def with_presets(values: Mapping[str, Any]) -> dict[str, Any]:
    """The values with the chosen time-control and bounds presets written in."""
    result = dict(values)
    time_preset = TIME_BY_KEY.get(str(values.get("time_preset", "")))
    if time_preset is not None:
        result["tc"] = time_preset.tc
        result["threads"] = str(time_preset.threads)
        for side in ("new_options", "base_options"):
            result[side] = set_option(str(values.get(side, "")), "Hash", str(time_preset.hash_mib))
    bounds = BOUNDS_BY_KEY.get(str(values.get("bounds", "")))
    if bounds is not None:
        result["elo0"], result["elo1"] = f"{bounds.elo0:g}", f"{bounds.elo1:g}"
    return result


def set_option(options: str, name: str, value: str) -> str:
    """`options` with `name=value`, replacing the option if present (case-insensitive)."""
    tokens = [t for t in options.split() if t.partition("=")[0].lower() != name.lower()]
    return " ".join([f"{name}={value}", *tokens])


def values_from_run(spec: RunSpec) -> dict[str, Any]:
    """A form pre-filled from an existing run's specification (reschedule)."""
    values = blank_values(spec.tests_repo)
    for name in (*PLAIN_RUN_ARGS, "num_games", "info"):
        values[name] = _text(getattr(spec, name))
    values["new_tc"] = spec.new_tc
    values["time_odds"] = bool(values["new_tc"]) and values["new_tc"] != values["tc"]
    values["auto_purge"] = spec.auto_purge
    values["disable_adjudication"] = not spec.adjudication
    values["time_preset"] = _matching_time_preset(values)
    _stop_rule_values(values, spec)
    return values


def _stop_rule_values(values: dict[str, Any], spec: RunSpec) -> None:
    sprt, spsa = spec.sprt, spec.spsa
    if sprt is not None:
        values["stop_rule"] = "sprt"
        for key in ("elo0", "elo1", "alpha", "beta", "elo_model"):
            values[key] = _text(sprt[key])
        values["bounds"] = next(
            (
                p.key
                for p in BOUNDS_PRESETS
                if (p.elo0, p.elo1) == (float(sprt["elo0"]), float(sprt["elo1"]))
            ),
            CUSTOM,
        )
        values["num_games"] = str(DEFAULT_GAMES)
    elif spsa is not None:
        values["stop_rule"] = "spsa"
        pairs = max(1, spec.num_games // 2)
        values["spsa_A"] = (
            f"{float(spsa['A']) / pairs:g}"  # stored A is absolute; the form's a ratio
        )
        values["spsa_alpha"] = _text(spsa["alpha"])
        values["spsa_gamma"] = _text(spsa["gamma"])
        values["spsa_raw_params"] = str(spsa.get("raw_params", ""))
    else:
        values["stop_rule"] = "games"


def _matching_time_preset(values: Mapping[str, Any]) -> str:
    for preset in TIME_PRESETS:
        hashes = {
            option_value(str(values[side]), "Hash") for side in ("new_options", "base_options")
        }
        if (
            values["tc"] == preset.tc
            and str(values["threads"]) == str(preset.threads)
            and hashes == {str(preset.hash_mib)}
        ):
            return preset.key
    return CUSTOM


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
