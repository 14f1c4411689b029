"""deploy/ as an operator installs it: Debian's nginx with deploy/nginx/arbiter.conf
(its addresses and ports templated, a self-signed certificate made here) in
front of one primary and two secondaries on the throwaway PostgreSQL. Through
nginx only, over TLS: a logged-in browser session submits a run and an approver
approves it, a real worker plays the whole run, and reads land on the
secondaries while every write reaches the primary."""

import os
import re
import shutil
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from arbiter.protocol.books import SHIPPED_BOOK
from arbiter.worker.sample_engine import make_sample_repo
from tests.web.live_server import (
    PASSWORD,
    Server,
    create_token,
    create_user,
    free_port,
    start_server,
    stop,
)
from tests.worker.support import STOCKFISH, needs_stockfish

pytestmark = pytest.mark.browser

SITE = Path(__file__).resolve().parents[2] / "deploy" / "nginx" / "arbiter.conf"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
TC = "N=320000"  # the sample engine plays a game in a fraction of a second
GAMES = 8

MAIN_CONF = """\
daemon off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
{user}
events {{ worker_connections 256; }}
http {{
    log_format routed '$request_method $uri $status $upstream_addr $request_id';
    access_log {dir}/access.log routed;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    include {dir}/arbiter.conf;
}}
"""


def site_config(primary: int, secondaries: list[int], http: int, https: int, tls: Path) -> str:
    """deploy/nginx/arbiter.conf with this machine's addresses, as an operator edits it."""
    text = SITE.read_text()
    text = re.sub(r"server 10\.0\.0\.10:8000;", f"server 127.0.0.1:{primary};", text, count=1)
    listed = "".join(f"    server 127.0.0.1:{port};\n" for port in secondaries)
    text = re.sub(r"(    server 10\.0\.0\.1[12]:8001;\n)+", listed, text)
    text = text.replace("server 10.0.0.10:8000 backup;", f"server 127.0.0.1:{primary} backup;")
    text = re.sub(r"    listen \[::\]:\d+[^;]*;\n", "", text)  # loopback only
    text = text.replace("listen 80;", f"listen 127.0.0.1:{http};")
    text = text.replace("listen 443 ssl http2;", f"listen 127.0.0.1:{https} ssl http2;")
    text = re.sub(r"ssl_certificate .*;", f"ssl_certificate {tls / 'cert.pem'};", text)
    text = re.sub(r"ssl_certificate_key .*;", f"ssl_certificate_key {tls / 'key.pem'};", text)
    assert "10.0.0." not in text, "every address of the example was replaced"
    return text


def trusting(cert: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(cert))


def self_signed(directory: Path) -> Path:
    directory.mkdir()
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", str(directory / "key.pem"), "-out", str(directory / "cert.pem"),
            "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return directory


@dataclass
class Site:
    url: str  # https://localhost:PORT, through nginx
    plain: str  # the port-80 listener
    cert: Path
    nginx_dir: Path
    primary: Server
    secondaries: list[Server]

    def routed(self) -> list[tuple[str, str, str, str, str]]:
        """nginx's log: (method, path, status, upstream address, request id)."""
        lines = (self.nginx_dir / "access.log").read_text().splitlines()
        return [tuple(line.split(" ")) for line in lines]  # type: ignore[misc]

    def port_of(self, server: Server) -> str:
        return str(server.port)


def start_nginx(directory: Path) -> subprocess.Popen[bytes]:
    with (directory / "nginx.out").open("wb") as log:
        return subprocess.Popen(
            [NGINX, "-p", str(directory), "-c", str(directory / "nginx.conf")],
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def wait_until_proxied(url: str, cert: Path, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError("nginx exited at start")
        try:
            if httpx.get(url + "/api/active_runs", verify=trusting(cert)).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)  # a 502 while the upstream starts is no reason to spin
    raise AssertionError("nginx did not start serving")


@pytest.fixture
def site(tmp_path: Path, postgres_database_url: str) -> Iterator[Site]:
    if not Path(NGINX).exists():
        pytest.fail("nginx is required: run scripts/install-system-deps")
    url = postgres_database_url
    data = tmp_path / "primary"
    create_user(data, "alice", url)
    create_user(data, "root", url, approver=True)
    primary = start_server(data, url, {"ARBITER_JOBS": "0"})
    # Each secondary has an empty data dir of its own, as on a machine of its
    # own: the book the worker downloads through them comes from the database.
    secondaries = [
        start_server(tmp_path / f"secondary-{n}", url, {"ARBITER_ROLE": "secondary"})
        for n in range(2)
    ]
    servers = [primary, *secondaries]
    nginx_dir = tmp_path / "nginx"
    nginx_dir.mkdir()
    tls = self_signed(tmp_path / "tls")
    http, https = free_port(), free_port()
    ports = [server.port for server in servers]
    (nginx_dir / "arbiter.conf").write_text(site_config(ports[0], ports[1:], http, https, tls))
    user = "user root;" if os.geteuid() == 0 else ""  # its temp files live in our tmp dir
    (nginx_dir / "nginx.conf").write_text(MAIN_CONF.format(dir=nginx_dir, user=user))
    nginx = start_nginx(nginx_dir)
    try:
        wait_until_proxied(f"https://localhost:{https}", tls / "cert.pem", nginx)
        yield Site(
            f"https://localhost:{https}",
            f"http://127.0.0.1:{http}",
            tls / "cert.pem",
            nginx_dir,
            primary,
            secondaries,
        )
    finally:
        nginx.terminate()
        nginx.wait(10)
        for server in servers:
            stop(server)


def log_in(page: Page, site: Site, username: str) -> None:
    page.goto(f"{site.url}/login")
    page.fill("#username", username)
    page.fill("#password", PASSWORD)
    page.click("form[action='/login'] button[type=submit]")
    expect(page.locator("header nav")).to_contain_text(username)


def submit_in_browser(page: Page, site: Site, repo_url: str) -> str:
    page.goto(f"{site.url}/tests/run")
    page.select_option("#time_preset", "custom")
    page.fill("#tests_repo", repo_url)
    page.fill("#new_tag", "stronger")
    page.fill("#base_tag", "master")
    page.fill("#tc", TC)
    page.fill("#book", SHIPPED_BOOK)  # hosted here: no internet needed
    page.check("input[name=stop_rule][value=games]")
    page.fill("#num_games", str(GAMES))
    page.click("form.new-run button[type=submit]")
    expect(page.locator(".flash")).to_contain_text("once an approver has approved it")
    return page.url.rsplit("/", 1)[1]


def run_worker(site: Site, token: str, directory: Path) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable, "-m", "arbiter", "worker",
        "--server", site.url,
        "--username", "alice",
        "--token", token,
        "--data-dir", str(directory),
        "--uuid-prefix", "nginx",
        "--concurrency", "1",
        "--fleet",
    ]  # fmt: skip
    env = {**os.environ, "SSL_CERT_FILE": str(site.cert)}  # trust the test's certificate
    env["ARBITER_WORKER_GIT_ALLOW"] = "file"  # the sample repository is local
    return subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=240, check=False
    )


def test_a_run_is_submitted_approved_and_played_through_nginx(
    browser: Browser, site: Site, tmp_path: Path, postgres_database_url: str
) -> None:
    needs_stockfish()
    repo = make_sample_repo(tmp_path / "engine", STOCKFISH)
    tester = browser.new_context(ignore_https_errors=True)
    approver = browser.new_context(ignore_https_errors=True)
    alice, root = tester.new_page(), approver.new_page()
    log_in(alice, site, "alice")
    log_in(root, site, "root")

    run_id = submit_in_browser(alice, site, repo.url)
    expect(alice.locator("#run-status")).to_have_text("pending")
    root.goto(f"{site.url}/tests/view/{run_id}")
    root.click("#approve")
    expect(root.locator(".flash")).to_contain_text("Run approved.")

    token = create_token(tmp_path / "primary", "alice", postgres_database_url)
    worker = run_worker(site, token, tmp_path / "worker")
    assert worker.returncode == 0, worker.stdout + worker.stderr

    run = httpx.get(f"{site.url}/api/get_run/{run_id}", verify=trusting(site.cert)).json()
    assert run["finished"]
    results = run["results"]
    assert results["wins"] + results["losses"] + results["draws"] == GAMES
    alice.goto(f"{site.url}/tests/view/{run_id}")
    expect(alice.locator("#run-status")).to_have_text("finished")

    # Every write went to the primary, every page and download to a secondary.
    primary = f"127.0.0.1:{site.port_of(site.primary)}"
    secondaries = {f"127.0.0.1:{site.port_of(server)}" for server in site.secondaries}
    routed = site.routed()
    writes = [(m, p, up) for m, p, _s, up, _id in routed if m == "POST" and p != "/api/upload_pgn"]
    assert {p for _m, p, _up in writes} >= {
        "/login",
        "/tests/run",
        f"/tests/view/{run_id}/approve",
        "/api/request_task",
        "/api/update_task",
    }
    assert {up for _m, _p, up in writes} == {primary}, writes
    reads = [(p, up) for m, p, _s, up, _id in routed if m == "GET" and p != "/tests/run"]
    assert any(p == f"/tests/view/{run_id}" for p, _up in reads)
    assert any(p.startswith("/api/book/") for p, _up in reads)  # the worker's book
    assert {up for _p, up in reads} <= secondaries, reads
    assert len({up for _p, up in reads}) == 2  # spread over both


def logged_by(servers: list[Server], text: str, patience: float = 10.0) -> list[Server]:
    """The servers whose log has `text`, waiting for it a while: a reply can reach
    the client before its access line reaches the log file."""
    deadline = time.monotonic() + patience
    while True:
        found = [server for server in servers if text in server.output()]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def nginx_logged(
    site: Site, start: tuple[str, str, str], patience: float = 30.0
) -> list[tuple[str, str, str, str, str]]:
    """nginx's log lines that begin so, waiting for one a while: nginx writes the
    line once it has finished with the request, after the client has its reply."""
    deadline = time.monotonic() + patience
    while True:
        found = [entry for entry in site.routed() if entry[:3] == start]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_the_proxy_sets_the_client_address_and_request_id_and_hides_monitoring(
    site: Site,
) -> None:
    # The client comes from 127.0.0.2 and nginx from 127.0.0.1: a server that
    # ignored nginx's X-Forwarded-For would log 127.0.0.1.
    client = httpx.Client(
        transport=httpx.HTTPTransport(local_address="127.0.0.2", verify=trusting(site.cert))
    )
    with client:
        spoofed = client.get(
            f"{site.url}/api/active_runs",
            headers={"X-Forwarded-For": "203.0.113.9", "X-Request-ID": "client-chosen"},
        )
    assert spoofed.status_code == 200
    request_id = spoofed.headers["x-request-id"]
    assert request_id != "client-chosen"  # nginx's own $request_id replaces it
    served = logged_by(site.secondaries, f"[{request_id}]")
    assert len(served) == 1
    [line] = [line for line in served[0].output().splitlines() if f"[{request_id}]" in line]
    assert line.endswith(" 127.0.0.2 -"), line  # the client's, as nginx saw it; not spoofed
    for path in ("/metrics", "/readyz", "/healthz"):
        assert httpx.get(site.url + path, verify=trusting(site.cert)).status_code == 404
    redirect = httpx.get(site.plain + "/tests", follow_redirects=False)
    assert redirect.status_code == 301
    assert redirect.headers["location"].startswith("https://")
    # A body over Arbiter's 2 MiB limit is refused by nginx before any process sees
    # it (Arbiter would answer 413 too, in JSON: nginx's page, no upstream, show who).
    too_large = httpx.post(
        f"{site.url}/api/update_task", content=b"x" * (3 * 1024 * 1024), verify=trusting(site.cert)
    )
    assert too_large.status_code == 413
    assert "nginx" in too_large.text
    refused = nginx_logged(site, ("POST", "/api/update_task", "413"))
    assert [entry[3] for entry in refused] == ["-"], site.routed()  # no upstream was asked
    # Below 2 MiB (and above nginx's default 1 MiB) a body reaches Arbiter, which
    # answers for it: nginx's limit is Arbiter's own, not less.
    within = httpx.post(
        f"{site.url}/api/update_task",
        content=b"x" * (3 * 1024 * 1024 // 2),
        verify=trusting(site.cert),
    )
    assert within.status_code == 400, within.text
    assert "error" in within.json()
