"""PostgreSQL URLs as libpq connection strings, for the connections Arbiter
opens outside SQLAlchemy's pool (the lease, the repository locks) and for
PostgreSQL's client programs (backups)."""

from sqlalchemy.engine import URL


def libpq_conninfo(url: URL, *, with_password: bool = True) -> str:
    """The libpq connection string of a PostgreSQL URL: SQLAlchemy's `host`
    parameters (a primary and its replicas) become libpq's comma lists."""
    from psycopg.conninfo import make_conninfo  # here: SQLite never imports psycopg

    hosts = url.query.get("host", ())
    named = [hosts] if isinstance(hosts, str) else list(hosts)
    params: dict[str, str] = {
        key: value if isinstance(value, str) else value[-1]
        for key, value in url.query.items()
        if key != "host"
    }
    if named:
        pairs = [host.rpartition(":") if ":" in host else (host, "", "") for host in named]
        params["host"] = ",".join(host for host, _, _ in pairs)
        if any(port for _, _, port in pairs):
            params["port"] = ",".join(port for _, _, port in pairs)
    elif url.host:
        params["host"] = url.host
        if url.port:
            params["port"] = str(url.port)
    password = url.password if with_password else None
    for key, value in (("user", url.username), ("password", password), ("dbname", url.database)):
        if value:
            params[key] = str(value)
    return make_conninfo(**params)
