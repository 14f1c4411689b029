"""An architecture filter's regex, evaluated in a child process."""

from arbiter.domain.arch_filter import matching_archs
from arbiter.protocol.messages import SUPPORTED_ARCHS


def test_arch_filter_negative_lookahead() -> None:
    matched = matching_archs("^(?!apple)")
    assert "apple-silicon" not in matched
    assert set(SUPPORTED_ARCHS) - {"apple-silicon"} <= matched
    assert "unknown" in matched
