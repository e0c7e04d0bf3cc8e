"""Who may use `perfconsole serve`: the token, its cookie, the websocket's own check, the access log,
and a page that asks no other host for anything. A real server in a subprocess each time; HTTP and
the websocket through aiohttp's client (textual-serve is an aiohttp app), the page in headless
Chromium where it is installed.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest
from serve_helpers import (CAPTURE_TERMINAL, PREFILL, free_port, launch_chromium, needs_chromium, needs_playwright,
                           screen, serve, stop, sync_playwright, wait_for_log, wait_for_port, wait_for_text)

from perfconsole.core.launch import warm
from perfconsole.tui import serve as serve_module

ACCESS_LINE = re.compile(r"^\d\d:\d\d:\d\d [A-Z]+ /\S* \d{3}$")


class Server:
    def __init__(self, port: int, log: Path, token: str) -> None:
        self.port, self.log, self.token = port, log, token
        self.url = f"http://127.0.0.1:{port}"

    def access_lines(self) -> list[str]:
        return [line for line in self.log.read_text().splitlines() if ACCESS_LINE.match(line)]


def start(tmp: Path, args: list[str], env: dict[str, str], token: str = "") -> tuple[subprocess.Popen, Server]:
    port = free_port()
    log = tmp / "serve.log"
    # No warm process: these servers' tabs launch no run, and the one a server keeps is test_serve.py's subject
    # (each would import torch for nothing, up to about 5 CPU-s).
    process = serve(["--port", str(port), *PREFILL, *args],
                    {**os.environ, "PERFCONSOLE_DATA_DIR": str(tmp / "data"), warm.OFF_VAR: "off", **env}, log)
    wait_for_port(port, process)
    wait_for_log(log, "serving the console on")
    return process, Server(port, log, token)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    token = "s3cret-" + uuid.uuid4().hex  # from the environment, so it is in no process's argv
    process, srv = start(tmp_path_factory.mktemp("serve"), [], {"PERFCONSOLE_TOKEN": token}, token)
    try:
        yield srv
    finally:
        stop(process, group=True)


def session() -> aiohttp.ClientSession:
    # A jar that keeps nothing: each request carries exactly the cookie the test gives it.
    return aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar())


async def status_of(url: str, **kwargs: object) -> int:
    async with session() as s, s.get(url, allow_redirects=False, **kwargs) as r:  # type: ignore[arg-type]
        return r.status


async def test_http_without_a_valid_token_or_cookie_is_403(server: Server):
    cookie = f"perfconsole-serve-{server.port}"
    assert await status_of(f"{server.url}/") == 403
    assert await status_of(f"{server.url}/?token=wrong") == 403
    assert await status_of(f"{server.url}/?token=") == 403
    assert await status_of(f"{server.url}/?token={server.token}x") == 403
    assert await status_of(f"{server.url}/static/js/textual.js") == 403
    assert await status_of(f"{server.url}/download/abc") == 403
    assert await status_of(f"{server.url}/", headers={"Cookie": f"{cookie}=wrong"}) == 403
    # the token itself is no cookie value: the cookie holds a digest of it
    assert await status_of(f"{server.url}/", headers={"Cookie": f"{cookie}={server.token}"}) == 403


async def test_the_token_sets_a_strict_httponly_cookie_and_redirects_to_the_page_without_it(server: Server):
    async with session() as s:
        async with s.get(f"{server.url}/?fontsize=20&token={server.token}", allow_redirects=False) as r:
            assert r.status == 302
            assert r.headers["Location"] == "/?fontsize=20"
            set_cookie = r.headers["Set-Cookie"]
        name_value, *attributes = [part.strip() for part in set_cookie.split(";")]
        name, value = name_value.split("=", 1)
        assert name == f"perfconsole-serve-{server.port}" and value and server.token not in value
        assert {"HttpOnly", "Path=/", "SameSite=Strict"} <= set(attributes), set_cookie
        async with s.get(f"{server.url}/?fontsize=20", headers={"Cookie": name_value}) as r:
            assert r.status == 200
            page = await r.text()
        async with s.get(f"{server.url}/static/fonts/RobotoMono-VariableFont_wght.ttf",
                         headers={"Cookie": name_value}) as r:
            assert r.status == 200 and len(await r.read()) > 100_000
    assert "fonts/RobotoMono-VariableFont_wght.ttf" in page and "googleapis" not in page


async def test_the_websocket_refuses_a_handshake_without_the_token(server: Server):
    ws = f"ws://127.0.0.1:{server.port}/ws?width=80&height=24"
    async with session() as s:
        for url, headers in [(ws, {}), (f"{ws}&token=wrong", {}),
                             (ws, {"Cookie": f"perfconsole-serve-{server.port}=wrong"}),
                             # a valid token, but the handshake comes from another site's page
                             (f"{ws}&token={server.token}", {"Origin": "http://evil.example"})]:
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await s.ws_connect(url, headers=headers)
            assert refused.value.status == 403, (url, headers)
        # With the token the console starts and draws: bytes of its screen arrive.
        async with s.ws_connect(f"{ws}&token={server.token}",
                                headers={"Origin": server.url}) as connection:
            message = await connection.receive(timeout=60)
            assert message.type == aiohttp.WSMsgType.BINARY, message
            await connection.send_json(["stdin", "\x11"])  # ctrl+q: the console quits


async def test_the_access_log_is_one_short_line_a_request_without_the_token(server: Server):
    await status_of(f"{server.url}/?token={server.token}&fontsize=18")
    await status_of(f"{server.url}/no/such/page?token=wrong")
    text = wait_for_log(server.log, "GET /no/such/page 403")
    lines = server.access_lines()
    assert any(line.endswith(" GET / 302") for line in lines), text
    assert all(len(line) < 80 for line in lines), lines
    # the token is in the one line that says where to go, in no access line
    assert [line for line in text.splitlines() if server.token in line] == [
        line for line in text.splitlines() if line.startswith("perfconsole: serving the console on")]
    assert "wrong" not in text and "fontsize" not in text


def test_the_printed_url_carries_the_token_flag_over_environment_and_a_random_one_otherwise(tmp_path):
    process, srv = start(tmp_path, ["--token", "from-flag"], {"PERFCONSOLE_TOKEN": "from-env"})
    stop(process, group=True)
    assert f"serving the console on {srv.url}/?token=from-flag " in srv.log.read_text()

    # An empty variable (an unset one expanded into it) does not turn the check off.
    process, srv = start(tmp_path, [], {"PERFCONSOLE_TOKEN": ""})
    stop(process, group=True)
    token = re.search(r"\?token=(\S+) ", srv.log.read_text())
    assert token and len(token.group(1)) >= 43, srv.log.read_text()  # 32 random bytes, URL-safe base64


async def test_no_token_on_loopback_when_asked_warns_and_answers_loopback_names_only(tmp_path):
    process, srv = start(tmp_path, ["--token", ""], {})
    try:
        assert await status_of(f"{srv.url}/") == 200
        assert await status_of(f"{srv.url}/", headers={"Host": f"localhost:{srv.port}"}) == 200
        # a site that points its own name at 127.0.0.1 (DNS rebinding) is refused
        assert await status_of(f"{srv.url}/", headers={"Host": f"evil.example:{srv.port}"}) == 403
        async with session() as s:
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await s.ws_connect(f"ws://127.0.0.1:{srv.port}/ws", headers={"Origin": "http://evil.example"})
            assert refused.value.status == 403
    finally:
        stop(process, group=True)
    text = srv.log.read_text()
    assert "perfconsole: warning: --token '': no token, so every account on this machine can open the console" \
        in text, text
    assert f"serving the console on {srv.url}/ " in text


def test_no_token_with_allow_remote_is_refused():
    out = subprocess.run([sys.executable, "-m", "perfconsole.tui.main", "serve", "--host", "0.0.0.0",
                          "--allow-remote", "--token", ""], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stdout == "", out
    assert out.stderr.startswith("perfconsole: error: --token '' with --allow-remote")
    assert len(out.stderr.strip().splitlines()) == 1


def test_the_page_loads_its_font_from_textual_serves_own_files():
    server = serve_module.ConsoleServer("true", "127.0.0.1", 8000, "http://127.0.0.1:8000", "t")
    page = serve_module.local_font_page(server.templates_path)
    assert "googleapis" not in page and not re.search(r"(?:href|src)=\"https?://", page)
    fonts = re.findall(r'url\("\{\{ config\.static\.url \}\}(fonts/[^"]+)"\)', page)
    assert len(fonts) == 2 and all((server.statics_path / f).is_file() for f in fonts), fonts


@pytest.mark.slow
@needs_chromium
@needs_playwright
def test_in_chromium_the_token_opens_the_console_and_the_page_asks_no_other_host(server: Server):
    requests: list[str] = []
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            context.on("request", lambda request: requests.append(request.url))
            page = context.new_page()
            page.add_init_script(CAPTURE_TERMINAL)

            assert page.goto(f"{server.url}/").status == 403
            assert page.goto(f"{server.url}/?token=wrong").status == 403
            assert not context.cookies()

            response = page.goto(f"{server.url}/?token={server.token}")
            assert response.status == 200 and page.url == f"{server.url}/", page.url
            wait_for_text(page, "1 Launch", "Run", "device", timeout=60)
            (cookie,) = context.cookies()
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/", cookie

            page.locator(".xterm-screen").click()  # keys go to the terminal
            assert "Search for commands" not in screen(page)
            page.keyboard.press("Control+p")  # the command palette: the key reached the console
            wait_for_text(page, "Search for commands", timeout=30)

            # A reload without the token: the cookie lets it in, and a new console starts.
            page.evaluate("window.__xterm = undefined")
            assert page.goto(f"{server.url}/").status == 200
            wait_for_text(page, "1 Launch", "Run", "device", timeout=60)
            # every font the page asked for has loaded (or failed) by now, so its requests are all seen
            assert page.evaluate("document.fonts.ready.then(() => document.fonts.status)") == "loaded"
        finally:
            browser.close()
    others = [url for url in requests if urlsplit(url).netloc != f"127.0.0.1:{server.port}"]
    assert not others, others
    assert f"{server.url}/static/fonts/RobotoMono-VariableFont_wght.ttf" in requests, requests
