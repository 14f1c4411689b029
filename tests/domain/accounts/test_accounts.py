"""Accounts on real storage (both backends): signup and approval, logins, worker
credentials and their cache, sessions, passwords, profiles and tokens."""

from typing import Literal

import pytest
from argon2 import PasswordHasher

from arbiter.domain import actions
from arbiter.domain.accounts import TOUCH_INTERVAL, Accounts, User
from arbiter.domain.credentials import WorkerProofs, digest
from arbiter.domain.errors import (
    AccountBlocked,
    AccountPending,
    InvalidCredentials,
    NotFound,
    PermissionDenied,
    TooManyAttempts,
    ValidationError,
)
from arbiter.storage import Storage
from arbiter.storage.base import ActionFilter
from arbiter.storage.records import ActionRecord, UserRecord
from tests.domain.support import (
    NEW_PASSWORD,
    OTHER_PASSWORD,
    PASSWORD,
    T0,
    WEAK_PASSWORD,
    Clock,
    cheap_hasher,
)

HOUR = 3600.0
DAY = 86400.0


@pytest.fixture
def root(accounts: Accounts) -> User:
    return accounts.create_user("root", PASSWORD, email="root@example.org", approver=True)


@pytest.fixture
def alice(accounts: Accounts) -> User:
    return accounts.create_user("alice", PASSWORD, email="alice@example.org")


@pytest.fixture
def bob(accounts: Accounts) -> User:
    return accounts.create_user("bob", PASSWORD, email="bob@example.org")


@pytest.fixture
def pending(accounts: Accounts) -> User:
    return accounts.signup("carol", PASSWORD, "carol@example.org")


def stored(storage: Storage, username: str) -> UserRecord:
    with storage.read() as tx:
        record = tx.users.get_by_key(username)
    assert record is not None
    return record


def logged(storage: Storage) -> list[ActionRecord]:
    with storage.read() as tx:
        return tx.actions.query(ActionFilter())


def swap_password_hash(storage: Storage, username: str, password: str) -> None:
    """Replace the hash behind the service's back, as a rehash would (version unchanged)."""
    record = stored(storage, username)
    with storage.write() as tx:
        tx.users.set_password_hash(record.id, cheap_hasher().hash(password), new_secret=False)


# --- signup and user creation ---


def test_signup_creates_a_pending_user(accounts: Accounts, storage: Storage) -> None:
    user = accounts.signup(
        "Alice", PASSWORD, " alice@example.org ", "https://github.com/alice/Stockfish/"
    )
    assert user.username == "Alice"
    assert user.pending
    assert not user.blocked
    assert not user.is_approver
    assert user.email == "alice@example.org"
    assert user.tests_repo == "https://github.com/alice/Stockfish"
    assert user.registration_time == T0
    assert accounts.get_user("alice") == user


def test_signup_stores_an_argon2_hash_not_the_password(
    accounts: Accounts, storage: Storage
) -> None:
    accounts.signup("alice", PASSWORD, "alice@example.org")
    record = stored(storage, "alice")
    assert record.password_hash.startswith("$argon2id$")
    assert PASSWORD not in record.password_hash


@pytest.mark.parametrize(
    ("username", "password", "email", "tests_repo", "field"),
    [
        pytest.param("a", PASSWORD, "a@example.org", "", "username", id="username-too-short"),
        pytest.param("x" * 33, PASSWORD, "a@example.org", "", "username", id="username-too-long"),
        pytest.param("al ice", PASSWORD, "a@example.org", "", "username", id="username-with-space"),
        pytest.param("al.ice", PASSWORD, "a@example.org", "", "username", id="username-with-dot"),
        pytest.param("alice", PASSWORD, "", "", "email", id="email-missing"),
        pytest.param("alice", PASSWORD, "alice", "", "email", id="email-without-at"),
        pytest.param("alice", PASSWORD, "alice@", "", "email", id="email-without-domain"),
        pytest.param(
            "alice",
            PASSWORD,
            "alice@example.org",
            "http://github.com/a/b",
            "tests_repo",
            id="tests-repo-http",
        ),
        pytest.param(
            "alice",
            PASSWORD,
            "alice@example.org",
            "github.com/a/b",
            "tests_repo",
            id="tests-repo-no-scheme",
        ),
        pytest.param("alice", "", "alice@example.org", "", "password", id="password-empty"),
        pytest.param(
            "alice", WEAK_PASSWORD, "alice@example.org", "", "password", id="password-weak"
        ),
        pytest.param(
            "violetkettle",
            "violetkettle",
            "v@example.org",
            "",
            "password",
            id="password-is-the-username",
        ),
        pytest.param(
            "alice", PASSWORD * 3, "alice@example.org", "", "password", id="password-too-long"
        ),
    ],
)
def test_signup_validation_names_the_field(
    accounts: Accounts, username: str, password: str, email: str, tests_repo: str, field: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        accounts.signup(username, password, email, tests_repo)
    assert raised.value.field == field
    assert accounts.list_users() == []


def test_weak_password_message_says_it_is_guessable(accounts: Accounts) -> None:
    with pytest.raises(ValidationError, match="too easy to guess"):
        accounts.signup("alice", WEAK_PASSWORD, "alice@example.org")


def test_password_longer_than_72_characters_is_refused(accounts: Accounts) -> None:
    long_password = (PASSWORD * 3)[:73]
    with pytest.raises(ValidationError, match="72") as raised:
        accounts.signup("alice", long_password, "alice@example.org")
    assert raised.value.field == "password"


def test_password_of_72_characters_is_accepted(accounts: Accounts) -> None:
    password = (PASSWORD * 3)[:72]
    accounts.create_user("alice", password)
    assert accounts.authenticate("alice", password).username == "alice"


@pytest.mark.parametrize("taken_as", ["alice", "ALICE", "Alice"])
def test_duplicate_username_in_any_case_is_a_username_error(
    accounts: Accounts, alice: User, taken_as: str
) -> None:
    with pytest.raises(ValidationError, match=r"^This username is already taken\.$") as raised:
        accounts.signup(taken_as, OTHER_PASSWORD, "other@example.org")
    assert raised.value.field == "username"
    assert [u.username for u in accounts.list_users()] == ["alice"]


def test_create_user_is_active_and_email_is_optional(accounts: Accounts) -> None:
    user = accounts.create_user("alice", PASSWORD)
    assert not user.pending
    assert not user.is_approver
    assert user.email == ""
    assert accounts.authenticate("alice", PASSWORD) == user


def test_create_user_can_make_an_approver(accounts: Accounts) -> None:
    assert accounts.create_user("root", PASSWORD, approver=True).is_approver


def test_create_user_checks_a_given_email(accounts: Accounts) -> None:
    with pytest.raises(ValidationError) as raised:
        accounts.create_user("alice", PASSWORD, email="not-an-email")
    assert raised.value.field == "email"


def test_get_user_ignores_case_and_unknown_is_none(accounts: Accounts, alice: User) -> None:
    assert accounts.get_user("ALICE") == alice
    assert accounts.get_user("nobody") is None


def test_a_user_carries_its_machine_limit(accounts: Accounts, alice: User) -> None:
    assert alice.machine_limit == 16  # the column's default


def test_list_users_filters(accounts: Accounts, alice: User, pending: User) -> None:
    assert [u.username for u in accounts.list_users()] == ["alice", "carol"]
    assert accounts.list_users(pending=True) == [pending]
    assert accounts.list_users(pending=False) == [alice]
    assert accounts.list_users(blocked=True) == []


# --- login by password ---


def test_authenticate_with_the_right_password(accounts: Accounts, alice: User) -> None:
    assert accounts.authenticate("alice", PASSWORD) == alice
    assert accounts.authenticate("ALICE", PASSWORD) == alice


def test_wrong_password_and_unknown_user_are_the_same_refusal(
    accounts: Accounts, alice: User
) -> None:
    with pytest.raises(InvalidCredentials) as wrong_password:
        accounts.authenticate("alice", OTHER_PASSWORD)
    with pytest.raises(InvalidCredentials) as unknown_user:
        accounts.authenticate("nobody", PASSWORD)
    assert str(wrong_password.value) == str(unknown_user.value)


def test_pending_account_is_refused_after_the_right_password(
    accounts: Accounts, pending: User
) -> None:
    with pytest.raises(AccountPending):
        accounts.authenticate("carol", PASSWORD)
    with pytest.raises(InvalidCredentials):
        accounts.authenticate("carol", OTHER_PASSWORD)


def test_blocked_account_is_refused_after_the_right_password(
    accounts: Accounts, root: User, alice: User
) -> None:
    accounts.set_blocked("root", "alice", True)
    with pytest.raises(AccountBlocked):
        accounts.authenticate("alice", PASSWORD)
    with pytest.raises(InvalidCredentials):
        accounts.authenticate("alice", OTHER_PASSWORD)


def test_login_rehashes_when_hasher_parameters_grow(
    accounts: Accounts, storage: Storage, clock: Clock, alice: User
) -> None:
    before = stored(storage, "alice")
    stronger = Accounts(storage, hasher=cheap_hasher(time_cost=2, memory_cost=16), clock=clock)
    assert stronger.authenticate("alice", PASSWORD) == alice
    after = stored(storage, "alice")
    assert after.password_hash != before.password_hash
    assert "m=16,t=2,p=1" in after.password_hash
    assert after.credentials_version == before.credentials_version
    assert stronger.authenticate("alice", PASSWORD) == alice


def test_login_with_unchanged_parameters_keeps_the_hash(
    accounts: Accounts, storage: Storage, alice: User
) -> None:
    before = stored(storage, "alice").password_hash
    accounts.authenticate("alice", PASSWORD)
    assert stored(storage, "alice").password_hash == before


# --- worker credentials ---


def test_worker_authenticates_with_the_password(accounts: Accounts, alice: User) -> None:
    assert accounts.authenticate_worker("alice", PASSWORD) == alice
    assert accounts.authenticate_worker("Alice", PASSWORD) == alice


def test_worker_with_wrong_password_or_unknown_user_is_refused(
    accounts: Accounts, alice: User
) -> None:
    with pytest.raises(InvalidCredentials):
        accounts.authenticate_worker("alice", OTHER_PASSWORD)
    with pytest.raises(InvalidCredentials):
        accounts.authenticate_worker("nobody", PASSWORD)


def test_worker_of_pending_or_blocked_account_is_refused(
    accounts: Accounts, root: User, alice: User, pending: User
) -> None:
    with pytest.raises(AccountPending):
        accounts.authenticate_worker("carol", PASSWORD)
    accounts.set_blocked("root", "alice", True)
    with pytest.raises(AccountBlocked):
        accounts.authenticate_worker("alice", PASSWORD)


class CountingHasher(PasswordHasher):
    """argon2 at the tests' cost, counting its verifications."""

    def __init__(self) -> None:
        super().__init__(time_cost=1, memory_cost=8, parallelism=1)
        self.verified = 0

    def verify(self, hash: str | bytes, password: str | bytes) -> Literal[True]:
        self.verified += 1
        return super().verify(hash, password)


KEY = bytes(range(32))


def proving_accounts(storage: Storage, hasher: PasswordHasher, key: bytes = KEY) -> Accounts:
    """An accounts service as a (re)started server has it: worker proofs under `key`."""
    return Accounts(storage, hasher=hasher, worker_proofs=WorkerProofs(key))


def test_verified_worker_password_is_not_checked_again(storage: Storage) -> None:
    hasher = CountingHasher()
    accounts = proving_accounts(storage, hasher)
    alice = accounts.create_user("alice", PASSWORD)
    assert accounts.authenticate_worker("alice", PASSWORD) == alice
    assert accounts.authenticate_worker("alice", PASSWORD) == alice
    assert hasher.verified == 1


def test_a_restarted_server_checks_a_returning_worker_without_argon2(storage: Storage) -> None:
    """The proof is in the database: a new process with the same key needs no
    argon2 for a password verified before; one with another key needs it once."""
    proving_accounts(storage, CountingHasher()).create_user("alice", PASSWORD)
    proving_accounts(storage, CountingHasher()).authenticate_worker("alice", PASSWORD)
    restarted = CountingHasher()
    assert proving_accounts(storage, restarted).authenticate_worker("alice", PASSWORD)
    assert restarted.verified == 0
    other_key = CountingHasher()
    accounts = proving_accounts(storage, other_key, key=b"k" * 32)
    accounts.authenticate_worker("alice", PASSWORD)
    accounts.authenticate_worker("alice", PASSWORD)
    assert other_key.verified == 1


def test_the_stored_proof_tells_nothing_without_its_key(storage: Storage) -> None:
    accounts = proving_accounts(storage, CountingHasher())
    accounts.create_user("alice", PASSWORD)
    accounts.authenticate_worker("alice", PASSWORD)
    record = stored(storage, "alice")
    assert record.worker_proof is not None
    assert record.worker_proof != digest(PASSWORD)
    fields = (record.id, record.credentials_version, record.password_hash, PASSWORD)
    assert record.worker_proof == WorkerProofs(KEY).of(*fields)
    assert record.worker_proof != WorkerProofs(b"k" * 32).of(*fields)


def test_a_wrong_password_beside_a_proof_is_checked_and_counted(storage: Storage) -> None:
    hasher = CountingHasher()
    accounts = proving_accounts(storage, hasher)
    accounts.create_user("alice", PASSWORD)
    accounts.authenticate_worker("alice", PASSWORD)
    with pytest.raises(InvalidCredentials):
        accounts.authenticate_worker("alice", OTHER_PASSWORD)
    assert hasher.verified == 2
    refusals = set()
    for _ in range(10):  # and guesses are throttled as before
        try:
            accounts.authenticate_worker("alice", OTHER_PASSWORD)
        except (InvalidCredentials, TooManyAttempts) as refusal:
            refusals.add(type(refusal))
    assert refusals == {InvalidCredentials, TooManyAttempts}


def test_a_proof_dies_with_a_new_hash_of_any_kind(storage: Storage) -> None:
    """A hash replaced behind the service's back (an import, a restore) ends the
    proof too, even without a new credentials version."""
    accounts = proving_accounts(storage, CountingHasher())
    accounts.create_user("alice", PASSWORD)
    accounts.authenticate_worker("alice", PASSWORD)
    swap_password_hash(storage, "alice", OTHER_PASSWORD)
    with pytest.raises(InvalidCredentials):
        accounts.authenticate_worker("alice", PASSWORD)
    assert accounts.authenticate_worker("alice", OTHER_PASSWORD).username == "alice"


def test_password_change_invalidates_the_cached_worker_password(
    accounts: Accounts, alice: User
) -> None:
    accounts.authenticate_worker("alice", PASSWORD)
    accounts.change_password("alice", PASSWORD, NEW_PASSWORD)
    with pytest.raises(InvalidCredentials):
        accounts.authenticate_worker("alice", PASSWORD)
    assert accounts.authenticate_worker("alice", NEW_PASSWORD) == alice


def test_blocking_invalidates_the_cached_worker_password(
    accounts: Accounts, storage: Storage, root: User, alice: User
) -> None:
    accounts.authenticate_worker("alice", PASSWORD)
    swap_password_hash(storage, "alice", OTHER_PASSWORD)
    accounts.set_blocked("root", "alice", True)
    accounts.set_blocked("root", "alice", False)
    with pytest.raises(InvalidCredentials):
        accounts.authenticate_worker("alice", PASSWORD)


def test_cached_worker_password_of_a_blocked_account_is_refused(
    accounts: Accounts, root: User, alice: User
) -> None:
    accounts.authenticate_worker("alice", PASSWORD)
    accounts.set_blocked("root", "alice", True)
    with pytest.raises(AccountBlocked):
        accounts.authenticate_worker("alice", PASSWORD)


def test_rejected_applicants_password_does_not_open_the_next_account(
    accounts: Accounts, root: User
) -> None:
    """SQLite may give a deleted user's id to the next account: a secret verified
    for the rejected applicant must not be remembered for that id."""
    accounts.signup("mallory", OTHER_PASSWORD, "mallory@example.org")
    with pytest.raises(AccountPending):
        accounts.authenticate_worker("mallory", OTHER_PASSWORD)
    accounts.reject("root", "mallory")
    accounts.signup("victim", NEW_PASSWORD, "victim@example.org")
    accounts.accept("root", "victim")
    with pytest.raises(InvalidCredentials):
        accounts.authenticate_worker("victim", OTHER_PASSWORD)


def test_worker_authenticates_with_a_token(accounts: Accounts, alice: User) -> None:
    token = accounts.create_token("alice", "box")
    assert token.startswith("arb_")
    assert accounts.authenticate_worker("alice", token) == alice
    assert accounts.authenticate_worker("ALICE", token) == alice


def test_revoked_token_is_refused(accounts: Accounts, alice: User) -> None:
    token = accounts.create_token("alice")
    [info] = accounts.list_tokens("alice")
    accounts.revoke_token("alice", info.id)
    with pytest.raises(InvalidCredentials):
        accounts.authenticate_worker("alice", token)


def test_proven_worker_is_remembered_until_something_could_change(
    accounts: Accounts, root: User, alice: User, bob: User
) -> None:
    token = accounts.create_token("alice")
    assert accounts.proven_worker("alice", token) is None
    accounts.authenticate_worker("alice", token)
    assert accounts.proven_worker("alice", token) == alice
    assert accounts.proven_worker("alice", token + "x") is None
    accounts.set_blocked("root", "bob", True)  # any block clears every proof
    assert accounts.proven_worker("alice", token) is None


def test_revoking_a_token_forgets_its_proof(accounts: Accounts, alice: User) -> None:
    token = accounts.create_token("alice")
    accounts.authenticate_worker("alice", token)
    [info] = accounts.list_tokens("alice")
    accounts.revoke_token("alice", info.id)
    assert accounts.proven_worker("alice", token) is None


def test_a_password_change_forgets_proofs(accounts: Accounts, alice: User) -> None:
    accounts.authenticate_worker("alice", PASSWORD)
    accounts.change_password("alice", PASSWORD, NEW_PASSWORD)
    assert accounts.proven_worker("alice", PASSWORD) is None


def test_token_of_another_user_is_refused(accounts: Accounts, alice: User, bob: User) -> None:
    bobs_token = accounts.create_token("bob")
    with pytest.raises(InvalidCredentials):
        accounts.authenticate_worker("alice", bobs_token)


def test_unknown_token_is_refused(accounts: Accounts, alice: User) -> None:
    with pytest.raises(InvalidCredentials):
        accounts.authenticate_worker("alice", "arb_" + "x" * 43)


def test_token_of_a_blocked_account_is_refused(accounts: Accounts, root: User, alice: User) -> None:
    token = accounts.create_token("alice")
    accounts.set_blocked("root", "alice", True)
    with pytest.raises(AccountBlocked):
        accounts.authenticate_worker("alice", token)


def test_token_use_is_recorded_at_most_every_touch_interval(
    accounts: Accounts, clock: Clock, alice: User
) -> None:
    token = accounts.create_token("alice")
    accounts.authenticate_worker("alice", token)
    assert accounts.list_tokens("alice")[0].last_used == T0
    clock.advance(TOUCH_INTERVAL)
    accounts.authenticate_worker("alice", token)
    assert accounts.list_tokens("alice")[0].last_used == T0
    clock.advance(1)
    accounts.authenticate_worker("alice", token)
    assert accounts.list_tokens("alice")[0].last_used == T0 + TOUCH_INTERVAL + 1


def test_bearer_token_names_its_user(accounts: Accounts, alice: User) -> None:
    token = accounts.create_token("alice")
    assert accounts.authenticate_token(token) == alice


TOKEN_REFUSED = r"^Invalid or revoked token\.$"


@pytest.mark.parametrize("token", ["", PASSWORD, "arb_unknown"])
def test_bearer_token_that_is_not_a_live_token_is_refused(
    accounts: Accounts, alice: User, token: str
) -> None:
    with pytest.raises(InvalidCredentials, match=TOKEN_REFUSED):
        accounts.authenticate_token(token)


def test_revoked_bearer_token_is_refused(accounts: Accounts, alice: User) -> None:
    token = accounts.create_token("alice")
    accounts.revoke_token("alice", accounts.list_tokens("alice")[0].id)
    with pytest.raises(InvalidCredentials, match=TOKEN_REFUSED):
        accounts.authenticate_token(token)


def test_bearer_token_of_a_rejected_applicant_is_refused(
    accounts: Accounts, root: User, pending: User
) -> None:
    token = accounts.create_token("carol")  # an operator may make one for a pending account
    accounts.reject("root", "carol")
    with pytest.raises(InvalidCredentials, match=TOKEN_REFUSED):
        accounts.authenticate_token(token)


# --- approvers: accept, reject, block ---


def manage(accounts: Accounts, operation: str, approver: str, username: str) -> None:
    if operation == "accept":
        accounts.accept(approver, username)
    elif operation == "reject":
        accounts.reject(approver, username)
    else:
        accounts.set_blocked(approver, username, True)


def test_accept_activates_and_records_the_action(
    accounts: Accounts, storage: Storage, clock: Clock, root: User, pending: User
) -> None:
    clock.advance(5)
    accounts.accept("root", "CAROL")
    assert accounts.authenticate("carol", PASSWORD).username == "carol"
    [action] = logged(storage)
    assert (action.action, action.username, action.user) == ("accept_user", "root", "carol")
    assert (action.message, action.time) == ("accepted", T0 + 5)


def test_reject_deletes_a_pending_account_and_records_the_action(
    accounts: Accounts, storage: Storage, root: User, pending: User
) -> None:
    accounts.reject("root", "carol")
    assert accounts.get_user("carol") is None
    [action] = logged(storage)
    assert (action.action, action.username, action.user) == ("reject_user", "root", "carol")
    assert action.message == "rejected"
    accounts.signup("carol", PASSWORD, "carol@example.org")


def test_reject_refuses_an_active_account(
    accounts: Accounts, storage: Storage, root: User, alice: User
) -> None:
    with pytest.raises(PermissionDenied, match="not pending"):
        accounts.reject("root", "alice")
    assert accounts.get_user("alice") == alice
    assert logged(storage) == []


def test_block_and_unblock_record_actions_with_messages(
    accounts: Accounts, storage: Storage, clock: Clock, root: User, alice: User
) -> None:
    accounts.set_blocked("root", "alice", True)
    user = accounts.get_user("alice")
    assert user is not None
    assert user.blocked
    clock.advance(1)
    accounts.set_blocked("root", "alice", False)
    user = accounts.get_user("alice")
    assert user is not None
    assert not user.blocked
    unblock, block = logged(storage)
    assert (block.action, block.username, block.user) == ("block_user", "root", "alice")
    assert (block.message, block.time) == ("blocked", T0)
    assert (unblock.action, unblock.message, unblock.time) == ("block_user", "unblocked", T0 + 1)


def test_blocking_ends_the_users_sessions(
    accounts: Accounts, root: User, alice: User, bob: User
) -> None:
    alices = [accounts.start_session(alice, remember=flag) for flag in (False, True)]
    bobs = accounts.start_session(bob, remember=False)
    accounts.set_blocked("root", "alice", True)
    accounts.set_blocked("root", "alice", False)
    assert [accounts.resolve_session(s.session_id) for s in alices] == [None, None]
    assert accounts.resolve_session(bobs.session_id) is not None


def test_approver_cannot_block_themselves(accounts: Accounts, storage: Storage, root: User) -> None:
    with pytest.raises(PermissionDenied, match="yourself"):
        accounts.set_blocked("ROOT", "root", True)
    assert not stored(storage, "root").blocked
    assert logged(storage) == []


@pytest.mark.parametrize("acting", ["alice", "nobody", "blocked_root"])
@pytest.mark.parametrize("operation", ["accept", "reject", "block"])
def test_only_active_approvers_manage_users(
    accounts: Accounts,
    storage: Storage,
    root: User,
    alice: User,
    pending: User,
    acting: str,
    operation: str,
) -> None:
    if acting == "blocked_root":
        accounts.create_user("root2", PASSWORD, approver=True)
        accounts.set_blocked("root2", "root", True)
        acting = "root"
    before = logged(storage)
    with pytest.raises(PermissionDenied, match="approvers"):
        manage(accounts, operation, acting, "carol")
    assert accounts.get_user("carol") == pending
    assert logged(storage) == before


@pytest.mark.parametrize("operation", ["accept", "reject", "block"])
def test_managing_an_unknown_user_is_not_found(
    accounts: Accounts, root: User, operation: str
) -> None:
    with pytest.raises(NotFound):
        manage(accounts, operation, "root", "nobody")


@pytest.mark.parametrize("operation", ["accept", "reject", "block"])
def test_change_and_its_action_commit_together(
    accounts: Accounts,
    storage: Storage,
    root: User,
    pending: User,
    operation: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every action name is refused, so recording the action fails after the change.
    monkeypatch.setattr(actions, "ACTION_NAMES", frozenset())
    with pytest.raises(ValueError, match="unknown action"):
        manage(accounts, operation, "root", "carol")
    assert accounts.get_user("carol") == pending


# --- browser sessions ---


def test_session_starts_and_resolves(accounts: Accounts, alice: User) -> None:
    new = accounts.start_session(alice, remember=False)
    assert new.expires_at == T0 + 12 * HOUR
    active = accounts.resolve_session(new.session_id)
    assert active is not None
    assert active.user == alice
    assert active.csrf_token == new.csrf_token
    assert active.expires_at == new.expires_at
    assert not active.remember


def test_a_session_id_and_its_csrf_token_carry_32_random_bytes(
    accounts: Accounts, alice: User
) -> None:
    new = accounts.start_session(alice, remember=False)
    assert len(new.session_id) == 43  # 32 bytes in unpadded base64url
    assert len(new.csrf_token) == 64  # 32 bytes in hex


def test_session_is_stored_only_as_a_digest(
    accounts: Accounts, storage: Storage, alice: User
) -> None:
    new = accounts.start_session(alice, remember=False)
    with storage.read() as tx:
        assert tx.sessions.get(new.session_id) is None
        assert tx.sessions.get(digest(new.session_id)) is not None


def test_each_session_gets_its_own_id_and_csrf_token(accounts: Accounts, alice: User) -> None:
    first = accounts.start_session(alice, remember=False)
    second = accounts.start_session(alice, remember=False)
    assert first.session_id != second.session_id
    assert first.csrf_token != second.csrf_token


def test_short_session_expires_after_its_lifetime(
    accounts: Accounts, clock: Clock, alice: User
) -> None:
    new = accounts.start_session(alice, remember=False)
    clock.advance(12 * HOUR - 1)
    assert accounts.resolve_session(new.session_id) is not None
    clock.advance(1)
    assert accounts.resolve_session(new.session_id) is None


def test_remembered_session_lives_400_days(accounts: Accounts, clock: Clock, alice: User) -> None:
    new = accounts.start_session(alice, remember=True)
    assert new.expires_at == T0 + 400 * DAY
    clock.advance(13 * HOUR)
    active = accounts.resolve_session(new.session_id)
    assert active is not None
    assert active.remember
    clock.advance(400 * DAY - 13 * HOUR)
    assert accounts.resolve_session(new.session_id) is None


def test_session_lifetimes_are_configurable(storage: Storage, clock: Clock, alice: User) -> None:
    custom = Accounts(storage, hasher=cheap_hasher(), clock=clock, session_hours=1, remember_days=2)
    assert custom.start_session(alice, remember=False).expires_at == T0 + HOUR
    assert custom.start_session(alice, remember=True).expires_at == T0 + 2 * DAY


def test_unknown_session_resolves_to_none(accounts: Accounts) -> None:
    assert accounts.resolve_session("no-such-session") is None


def test_ended_session_resolves_to_none(accounts: Accounts, alice: User) -> None:
    new = accounts.start_session(alice, remember=False)
    other = accounts.start_session(alice, remember=False)
    accounts.end_session(new.session_id)
    accounts.end_session(new.session_id)
    assert accounts.resolve_session(new.session_id) is None
    assert accounts.resolve_session(other.session_id) is not None


def test_session_of_a_blocked_user_resolves_to_none(
    accounts: Accounts, storage: Storage, alice: User
) -> None:
    new = accounts.start_session(alice, remember=False)
    with storage.write() as tx:
        tx.users.set_blocked(alice.id, True)  # the session row itself survives
    assert accounts.resolve_session(new.session_id) is None


def test_resolving_records_last_seen_at_most_every_touch_interval(
    accounts: Accounts, storage: Storage, clock: Clock, alice: User
) -> None:
    new = accounts.start_session(alice, remember=True)

    def last_seen() -> float:
        with storage.read() as tx:
            session = tx.sessions.get(digest(new.session_id))
        assert session is not None
        return session.last_seen

    clock.advance(TOUCH_INTERVAL)
    accounts.resolve_session(new.session_id)
    assert last_seen() == T0
    clock.advance(1)
    accounts.resolve_session(new.session_id)
    assert last_seen() == T0 + TOUCH_INTERVAL + 1


def test_purge_expired_sessions(accounts: Accounts, clock: Clock, alice: User) -> None:
    short = accounts.start_session(alice, remember=False)
    remembered = accounts.start_session(alice, remember=True)
    assert accounts.purge_expired_sessions() == 0
    clock.advance(12 * HOUR)
    assert accounts.purge_expired_sessions() == 1
    assert accounts.resolve_session(short.session_id) is None
    assert accounts.resolve_session(remembered.session_id) is not None


# --- passwords and profiles ---


def test_change_password_checks_the_old_one(accounts: Accounts, alice: User) -> None:
    with pytest.raises(ValidationError) as raised:
        accounts.change_password("alice", OTHER_PASSWORD, NEW_PASSWORD)
    assert raised.value.field == "old_password"
    assert accounts.authenticate("alice", PASSWORD) == alice


@pytest.mark.parametrize(
    "new_password",
    ["", WEAK_PASSWORD, "alice", (NEW_PASSWORD * 4)[:73]],
    ids=["empty", "weak", "the-username", "too-long"],
)
def test_change_password_refuses_a_bad_new_one(
    accounts: Accounts, alice: User, new_password: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        accounts.change_password("alice", PASSWORD, new_password)
    assert raised.value.field == "new_password"
    assert accounts.authenticate("alice", PASSWORD) == alice


def test_change_password_replaces_the_password(
    accounts: Accounts, storage: Storage, alice: User
) -> None:
    version = stored(storage, "alice").credentials_version
    accounts.change_password("ALICE", PASSWORD, NEW_PASSWORD)
    assert accounts.authenticate("alice", NEW_PASSWORD) == alice
    with pytest.raises(InvalidCredentials):
        accounts.authenticate("alice", PASSWORD)
    assert stored(storage, "alice").credentials_version == version + 1


def test_change_password_keeps_the_given_session_and_ends_the_others(
    accounts: Accounts, alice: User, bob: User
) -> None:
    current = accounts.start_session(alice, remember=False)
    elsewhere = accounts.start_session(alice, remember=True)
    bobs = accounts.start_session(bob, remember=False)
    accounts.change_password("alice", PASSWORD, NEW_PASSWORD, keep_session_id=current.session_id)
    assert accounts.resolve_session(current.session_id) is not None
    assert accounts.resolve_session(elsewhere.session_id) is None
    assert accounts.resolve_session(bobs.session_id) is not None


def test_change_password_without_a_kept_session_ends_them_all(
    accounts: Accounts, alice: User
) -> None:
    session = accounts.start_session(alice, remember=False)
    accounts.change_password("alice", PASSWORD, NEW_PASSWORD)
    assert accounts.resolve_session(session.session_id) is None


def test_change_password_of_unknown_user_is_not_found(accounts: Accounts) -> None:
    with pytest.raises(NotFound):
        accounts.change_password("nobody", PASSWORD, NEW_PASSWORD)


def test_update_profile_stores_cleaned_values(accounts: Accounts, alice: User) -> None:
    accounts.update_profile(
        "ALICE", email=" new@example.org ", tests_repo=" https://github.com/alice/sf/ "
    )
    user = accounts.get_user("alice")
    assert user is not None
    assert (user.email, user.tests_repo) == ("new@example.org", "https://github.com/alice/sf")
    accounts.update_profile("alice", email="new@example.org", tests_repo="")
    user = accounts.get_user("alice")
    assert user is not None
    assert user.tests_repo == ""


@pytest.mark.parametrize(
    ("email", "tests_repo", "field"),
    [
        ("", "", "email"),
        ("nope", "", "email"),
        ("a@example.org", "http://github.com/a/b", "tests_repo"),
        ("a@example.org", "https://github.com/a/b?x=1", "tests_repo"),
    ],
)
def test_update_profile_validates(
    accounts: Accounts, alice: User, email: str, tests_repo: str, field: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        accounts.update_profile("alice", email=email, tests_repo=tests_repo)
    assert raised.value.field == field
    assert accounts.get_user("alice") == alice


def test_update_profile_of_unknown_user_is_not_found(accounts: Accounts) -> None:
    with pytest.raises(NotFound):
        accounts.update_profile("nobody", email="a@example.org", tests_repo="")


# --- worker tokens ---


def test_create_and_list_tokens(accounts: Accounts, clock: Clock, alice: User) -> None:
    first = accounts.create_token("alice", "  laptop  ")
    clock.advance(1)
    second = accounts.create_token("alice")
    assert first != second
    assert all(token.startswith("arb_") for token in (first, second))
    infos = accounts.list_tokens("alice")
    assert [(i.label, i.created_at, i.last_used, i.revoked) for i in infos] == [
        ("laptop", T0, None, False),
        ("", T0 + 1, None, False),
    ]


def test_only_token_digests_are_stored(accounts: Accounts, storage: Storage, alice: User) -> None:
    token = accounts.create_token("alice", "box")
    with storage.read() as tx:
        [record] = tx.tokens.list_for_user(alice.id)
    assert record.token_hash == digest(token)
    assert token not in repr(record)


def test_token_label_is_limited(accounts: Accounts, alice: User) -> None:
    with pytest.raises(ValidationError) as raised:
        accounts.create_token("alice", "x" * 65)
    assert raised.value.field == "label"
    assert accounts.list_tokens("alice") == []


def test_revoke_token(accounts: Accounts, clock: Clock, alice: User) -> None:
    accounts.create_token("alice")
    [info] = accounts.list_tokens("alice")
    clock.advance(30)
    accounts.revoke_token("alice", info.id)
    [revoked] = accounts.list_tokens("alice")
    assert revoked.revoked
    assert revoked.revoked_at == T0 + 30


def test_revoke_unknown_token_is_not_found(accounts: Accounts, alice: User) -> None:
    with pytest.raises(NotFound, match=r"^No such token\.$"):
        accounts.revoke_token("alice", 12345)


def test_own_token_keeps_its_label(accounts: Accounts, alice: User) -> None:
    accounts.create_own_token("alice", PASSWORD, "  box ")
    accounts.create_own_token("alice", PASSWORD)
    assert [info.label for info in accounts.list_tokens("alice")] == ["box", ""]


def test_revoke_someone_elses_token_is_not_found(
    accounts: Accounts, alice: User, bob: User
) -> None:
    bobs_token = accounts.create_token("bob")
    [info] = accounts.list_tokens("bob")
    with pytest.raises(NotFound):
        accounts.revoke_token("alice", info.id)
    assert accounts.authenticate_worker("bob", bobs_token) == bob


def test_tokens_of_unknown_user_are_not_found(accounts: Accounts) -> None:
    with pytest.raises(NotFound, match=r"^No user named nobody\.$"):
        accounts.create_token("nobody")
    with pytest.raises(NotFound):
        accounts.list_tokens("nobody")


def test_refusals_to_manage_users_say_why(accounts: Accounts, root: User, alice: User) -> None:
    with pytest.raises(PermissionDenied, match=r"^You cannot block yourself\.$"):
        accounts.set_blocked("root", "root", True)
    with pytest.raises(PermissionDenied, match=r"^Only approvers may manage users\.$"):
        accounts.set_blocked("alice", "root", True)


def test_signups_nobody_accepted_in_time_are_removed_and_logged(
    accounts: Accounts, storage: Storage, clock: Clock
) -> None:
    accounts.signup("old", PASSWORD, "old@example.org")
    accounts.create_user("kept", PASSWORD, email="kept@example.org")  # accepted: never removed
    clock.advance(20 * DAY)
    accounts.signup("young", PASSWORD, "young@example.org")
    assert accounts.remove_stale_signups(0) == []  # 0 keeps every signup
    assert accounts.remove_stale_signups(30) == []
    clock.advance(11 * DAY)
    assert accounts.remove_stale_signups(30) == ["old"]
    assert accounts.get_user("old") is None
    assert {user.username for user in accounts.list_users()} == {"kept", "young"}
    with storage.read() as tx:
        logged = tx.actions.query(ActionFilter(action="reject_user"))
    assert [(a.username, a.user, a.message) for a in logged] == [
        ("arbiter.system", "old", "signup not accepted within 30 days")
    ]
