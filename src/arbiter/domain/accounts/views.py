"""What the rest of the program sees of accounts: never a password hash."""

from dataclasses import dataclass

from arbiter.storage.records import TokenRecord, UserRecord


@dataclass(frozen=True, slots=True)
class User:
    """A user as the rest of the program sees one: never with the password hash."""

    id: int
    username: str
    email: str
    registration_time: float
    pending: bool
    blocked: bool
    is_approver: bool
    tests_repo: str
    machine_limit: int

    @classmethod
    def from_record(cls, record: UserRecord) -> "User":
        return cls(
            id=record.id,
            username=record.username,
            email=record.email,
            registration_time=record.registration_time,
            pending=record.pending,
            blocked=record.blocked,
            is_approver=record.is_approver,
            tests_repo=record.tests_repo,
            machine_limit=record.machine_limit,
        )


@dataclass(frozen=True, slots=True)
class NewSession:
    """A session just started; `session_id` goes into the cookie and nowhere else."""

    session_id: str
    csrf_token: str
    expires_at: float


@dataclass(frozen=True, slots=True)
class ActiveSession:
    user: User
    csrf_token: str
    expires_at: float
    remember: bool


@dataclass(frozen=True, slots=True)
class TokenInfo:
    id: int
    label: str
    created_at: float
    last_used: float | None
    revoked_at: float | None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    @classmethod
    def from_record(cls, record: TokenRecord) -> "TokenInfo":
        return cls(record.id, record.label, record.created_at, record.last_used, record.revoked_at)
