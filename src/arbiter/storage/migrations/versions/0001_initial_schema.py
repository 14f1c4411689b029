"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22 19:11:20.454028
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "actions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("username", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=24), nullable=True),
        sa.Column("run", sa.String(length=64), nullable=True),
        sa.Column("task_id", sa.Integer(), nullable=True),
        sa.Column("worker", sa.String(length=160), nullable=True),
        sa.Column("user", sa.String(length=64), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column(
            "data",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_actions")),
    )
    with op.batch_alter_table("actions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_actions_action_time"), ["action", "time"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_actions_run_id_time"), ["run_id", "time"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_actions_time"), ["time"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_actions_username_time"), ["username", "time"], unique=False
        )

    op.create_table(
        "books",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("username", sa.String(length=64), nullable=False),
        sa.Column("sri", sa.String(length=128), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("uploaded_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_books")),
    )
    op.create_table(
        "kv",
        sa.Column("key", sa.String(length=128), nullable=False),
        sa.Column(
            "value",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_kv")),
    )
    op.create_table(
        "nets",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("username", sa.String(length=64), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("uploaded_at", sa.Float(), nullable=False),
        sa.Column("downloads", sa.Integer(), nullable=False),
        sa.Column("is_master", sa.Boolean(), nullable=False),
        sa.Column(
            "first_test",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "last_test",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_nets")),
    )
    op.create_table(
        "pgns",
        sa.Column("run_id", sa.String(length=24), nullable=False),
        sa.Column("task_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("pgn_zip", sa.LargeBinary(), nullable=False),
        sa.Column("uploaded_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "task_id", name=op.f("pk_pgns")),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=24), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("username", sa.String(length=64), nullable=False),
        sa.Column("start_time", sa.Float(), nullable=False),
        sa.Column("last_updated", sa.Float(), nullable=False),
        sa.Column("tc_base", sa.Float(), nullable=False),
        sa.Column("rescheduled_from", sa.String(length=24), nullable=True),
        sa.Column("approved", sa.Boolean(), nullable=False),
        sa.Column("approver", sa.String(length=64), nullable=False),
        sa.Column("finished", sa.Boolean(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("failed", sa.Boolean(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("is_green", sa.Boolean(), nullable=False),
        sa.Column("is_yellow", sa.Boolean(), nullable=False),
        sa.Column("workers", sa.Integer(), nullable=False),
        sa.Column("cores", sa.Integer(), nullable=False),
        sa.Column("committed_games", sa.BigInteger(), nullable=False),
        sa.Column("total_games", sa.BigInteger(), nullable=False),
        sa.Column("wins", sa.BigInteger(), nullable=False),
        sa.Column("losses", sa.BigInteger(), nullable=False),
        sa.Column("draws", sa.BigInteger(), nullable=False),
        sa.Column("crashes", sa.BigInteger(), nullable=False),
        sa.Column("time_losses", sa.BigInteger(), nullable=False),
        sa.Column(
            "pentanomial",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("nps", sa.Float(), nullable=False),
        sa.Column("games_per_minute", sa.Float(), nullable=False),
        sa.Column(
            "args",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_runs_finished_last_updated"), ["finished", "last_updated"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_runs_username_start_time"), ["username", "start_time"], unique=False
        )

    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("username", sa.String(length=64), nullable=False),
        sa.Column("username_key", sa.String(length=64), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=False),
        sa.Column("password_hash", sa.String(length=255), nullable=False),
        sa.Column("registration_time", sa.Float(), nullable=False),
        sa.Column("pending", sa.Boolean(), nullable=False),
        sa.Column("blocked", sa.Boolean(), nullable=False),
        sa.Column("is_approver", sa.Boolean(), nullable=False),
        sa.Column("tests_repo", sa.String(length=500), nullable=False),
        sa.Column("machine_limit", sa.Integer(), nullable=False),
        sa.Column("credentials_version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("username", name=op.f("uq_users_username")),
        sa.UniqueConstraint("username_key", name=op.f("uq_users_username_key")),
    )
    op.create_table(
        "workers",
        sa.Column("worker_name", sa.String(length=120), nullable=False),
        sa.Column("blocked", sa.Boolean(), nullable=False),
        sa.Column("message", sa.String(length=500), nullable=False),
        sa.Column("last_updated", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("worker_name", name=op.f("pk_workers")),
    )
    op.create_table(
        "sessions",
        sa.Column("id_hash", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("last_seen", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("remember", sa.Boolean(), nullable=False),
        sa.Column("csrf_token", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_sessions_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id_hash", name=op.f("pk_sessions")),
    )
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sessions_expires_at"), ["expires_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_sessions_user_id"), ["user_id"], unique=False)

    op.create_table(
        "tasks",
        sa.Column("run_id", sa.String(length=24), nullable=False),
        sa.Column("task_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("num_games", sa.Integer(), nullable=False),
        sa.Column("start", sa.BigInteger(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("bad", sa.Boolean(), nullable=False),
        sa.Column("last_updated", sa.Float(), nullable=False),
        sa.Column("username", sa.String(length=64), nullable=False),
        sa.Column("worker_name", sa.String(length=120), nullable=False),
        sa.Column("unique_key", sa.String(length=64), nullable=False),
        sa.Column("remote_addr", sa.String(length=64), nullable=False),
        sa.Column(
            "worker_info",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("wins", sa.Integer(), nullable=False),
        sa.Column("losses", sa.Integer(), nullable=False),
        sa.Column("draws", sa.Integer(), nullable=False),
        sa.Column("crashes", sa.Integer(), nullable=False),
        sa.Column("time_losses", sa.Integer(), nullable=False),
        sa.Column(
            "pentanomial",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("residual", sa.Float(), nullable=True),
        sa.Column(
            "spsa_params",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_tasks_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "task_id", name=op.f("pk_tasks")),
    )
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_tasks_active_run_id"), ["active", "run_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_tasks_worker_name_active"), ["worker_name", "active"], unique=False
        )

    op.create_table(
        "worker_tokens",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=100), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("last_used", sa.Float(), nullable=True),
        sa.Column("revoked_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_worker_tokens_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_worker_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_worker_tokens_token_hash")),
    )
    with op.batch_alter_table("worker_tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_worker_tokens_user_id"), ["user_id"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("worker_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_worker_tokens_user_id"))

    op.drop_table("worker_tokens")
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tasks_worker_name_active"))
        batch_op.drop_index(batch_op.f("ix_tasks_active_run_id"))

    op.drop_table("tasks")
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sessions_user_id"))
        batch_op.drop_index(batch_op.f("ix_sessions_expires_at"))

    op.drop_table("sessions")
    op.drop_table("workers")
    op.drop_table("users")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_runs_username_start_time"))
        batch_op.drop_index(batch_op.f("ix_runs_finished_last_updated"))

    op.drop_table("runs")
    op.drop_table("pgns")
    op.drop_table("nets")
    op.drop_table("kv")
    op.drop_table("books")
    with op.batch_alter_table("actions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_actions_username_time"))
        batch_op.drop_index(batch_op.f("ix_actions_time"))
        batch_op.drop_index(batch_op.f("ix_actions_run_id_time"))
        batch_op.drop_index(batch_op.f("ix_actions_action_time"))

    op.drop_table("actions")
