"""The public API: __all__ lists exactly what the package exports."""

import inspect

from arbiter import stats


def test_all_names_importable() -> None:
    for name in stats.__all__:
        assert hasattr(stats, name), name


def test_all_is_complete_and_sorted() -> None:
    public = {
        name
        for name, value in vars(stats).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert public == set(stats.__all__)
    assert len(stats.__all__) == len(set(stats.__all__))


def test_no_numpy_or_scipy_at_runtime() -> None:
    import subprocess
    import sys

    code = (
        "import sys, arbiter.stats as s; s.sprt_elo([1,2,3,2,1], 0, 2);"
        "s.chi2_residuals({'a': [10, 10, 10], 'b': [12, 9, 10]});"
        "assert 'numpy' not in sys.modules and 'scipy' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
