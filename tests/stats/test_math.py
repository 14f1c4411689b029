"""Special functions against scipy (used here only as an oracle)."""

import math

import pytest

from arbiter.stats._math import (
    brent,
    chi2_sf,
    normal_cdf,
    normal_isf,
    normal_log_cdf,
    normal_ppf,
    normal_sf,
)

scipy_stats = pytest.importorskip("scipy.stats")


@pytest.mark.parametrize("p", [1e-300, 1e-20, 1e-9, 0.001, 0.025, 0.3, 0.5, 0.7, 0.975, 1 - 1e-12])
def test_ppf(p: float) -> None:
    assert normal_ppf(p) == pytest.approx(scipy_stats.norm.ppf(p), rel=1e-13, abs=1e-15)


@pytest.mark.parametrize("q", [1e-200, 1e-30, 0.05 / 3000, 0.2])
def test_isf(q: float) -> None:
    assert normal_isf(q) == pytest.approx(scipy_stats.norm.isf(q), rel=1e-13)


@pytest.mark.parametrize("x", [-40.0, -8.0, -1.0, 0.0, 2.5, 9.0])
def test_cdf_sf_logcdf(x: float) -> None:
    assert normal_cdf(x) == pytest.approx(scipy_stats.norm.cdf(x), rel=1e-13, abs=1e-300)
    assert normal_sf(x) == pytest.approx(scipy_stats.norm.sf(x), rel=1e-13, abs=1e-300)
    assert normal_log_cdf(x) == pytest.approx(scipy_stats.norm.logcdf(x), rel=1e-12)
    assert normal_log_cdf(-60.0) == pytest.approx(scipy_stats.norm.logcdf(-60.0), rel=1e-9)


@pytest.mark.parametrize(
    ("x", "dof"), [(0.5, 1), (3.0, 2), (10.0, 2), (50.0, 3), (9000.0, 9998), (12000.0, 9998)]
)
def test_chi2_sf(x: float, dof: int) -> None:
    assert chi2_sf(x, dof) == pytest.approx(scipy_stats.chi2.sf(x, dof), rel=1e-10, abs=1e-300)


def test_chi2_sf_edges() -> None:
    assert chi2_sf(0.0, 3) == 1.0
    with pytest.raises(ValueError, match="degrees"):
        chi2_sf(1.0, 0)


def test_ppf_domain() -> None:
    with pytest.raises(ValueError, match="probability"):
        normal_ppf(1.0)


def test_brent() -> None:
    assert brent(lambda x: x * x - 2.0, 0.0, 2.0) == pytest.approx(math.sqrt(2.0), rel=1e-14)
    assert brent(math.cos, 0.0, 3.0) == pytest.approx(math.pi / 2, rel=1e-14)
    assert brent(lambda x: x, 0.0, 1.0) == 0.0
    with pytest.raises(ValueError, match="sign change"):
        brent(lambda x: x * x + 1.0, -1.0, 1.0)
