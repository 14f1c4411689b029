"""git's rules for repository URLs, checked before git sees one."""

import pytest

from arbiter.domain.errors import ValidationError
from arbiter.domain.repos.git_names import check_repo_url


def test_check_repo_url_names_the_given_field() -> None:
    with pytest.raises(ValidationError) as caught:
        check_repo_url("nope", field="repo")
    assert caught.value.field == "repo"
