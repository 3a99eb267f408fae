"""Media "by URL" without SSRF: what the proxy refuses, and proof that it never connected.

Honesty of the "public host" simulation: a real public address cannot be used offline, so the
tests stand a media server on 127.0.0.2 and let an injected resolver say that `media.example` is
127.0.0.2; the operator escape hatch is scoped to exactly that address (allow_private=["127.0.0.2"]).
Everything "internal" lives on 127.0.0.1, which stays refused. A counting TCP listener on
127.0.0.1 records every connection it accepts; `settle()` sends one probe connection of its own
and waits until that probe was accepted (accepts are FIFO), so a count of 0 means no earlier
connection from the proxy ever reached it.
"""
import http.server
import ipaddress
import itertools
import logging
import socket
import socketserver
import threading
import time

import pytest

from durable_ledger.auth import Principal
from durable_ledger.kernel.config import Config
from durable_ledger.gate.answers import answer_dict
from durable_ledger import gate
from durable_ledger.jobs import jobs, leases
from durable_ledger.store.db import db
from durable_ledger.wordpress.proxy import create_proxy_app
from durable_ledger.wordpress.proxy import media as M
from durable_ledger.kernel.errors import MediaFetchFailed
from durable_ledger.wordpress.proxy.sites import SiteProfile, _profile

PUBLIC_SIM = "127.0.0.2"  # stands in for a public media host; the only address allow_private covers
PNG = b"\x89PNG\r\n\x1a\n" + b"x" * 100
MSG = "the media URL could not be fetched"


# ---------------------------------------------------------------------------------------------
# helpers: a counting listener, a small HTTP server, spies on the resolver and on connect

class CountingListener(socketserver.ThreadingTCPServer):
    """Counts accepted connections in accept order (verify_request runs in the accept loop)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host="127.0.0.1", port=0):
        self.accepted = 0
        self._lock = threading.Lock()
        super().__init__((host, port), socketserver.BaseRequestHandler)
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def verify_request(self, request, client_address):
        with self._lock:
            self.accepted += 1
        return True

    def settle(self) -> int:
        """Connections accepted before a probe of our own (FIFO accept queue)."""
        before = self.accepted
        with socket.create_connection(self.server_address, timeout=5):
            deadline = time.monotonic() + 5
            while self.accepted == before and time.monotonic() < deadline:
                time.sleep(0.01)
        assert self.accepted > before, "the probe connection was never accepted"
        return self.accepted - 1

    def close(self):
        self.shutdown()
        self.server_close()


class MediaServer(http.server.ThreadingHTTPServer):
    """routes: path -> (status, headers, body) or a callable(handler)."""

    daemon_threads = True

    def __init__(self, host=PUBLIC_SIM, port=0, routes=None):
        self.routes = routes or {}
        self.requests = []  # (path, Host header)
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                server.requests.append((self.path, self.headers.get("Host")))
                route = server.routes.get(self.path.split("?")[0], (404, {}, b"nope"))
                if callable(route):
                    return route(self)
                status, headers, body = route
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                if "Content-Length" not in headers and "Transfer-Encoding" not in headers:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        super().__init__((host, port), Handler)
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def url(self, path, host="media.example"):
        return f"http://{host}:{self.port}{path}"

    def close(self):
        self.shutdown()
        self.server_close()


def answers(*ips):
    """getaddrinfo-shaped answers for these addresses."""
    out = []
    for ip in ips:
        if ":" in ip:
            out.append((socket.AF_INET6, socket.SOCK_STREAM, 6, "", (ip, 0, 0, 0)))
        else:
            out.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, 0)))
    return out


class Resolver:
    """Injected resolver: name -> list of address lists (one per call; the last one repeats)."""

    def __init__(self, table=None, real=False):
        self.table, self.real, self.calls = table or {}, real, []

    def __call__(self, host, port, family=0, type=0, proto=0, flags=0):
        self.calls.append(host)
        if host in self.table:
            seq = self.table[host]
            ips = seq[min(len(self.calls_for(host)) - 1, len(seq) - 1)]
            return [(f, t, p, c, (sa[0], port) + sa[2:]) for f, t, p, c, sa in answers(*ips)]
        if self.real:
            return socket.getaddrinfo(host, port, family, type, proto, flags)
        raise socket.gaierror(socket.EAI_NONAME, "unknown in this test")

    def calls_for(self, host):
        return [h for h in self.calls if h == host]


@pytest.fixture
def connects(monkeypatch):
    """Every TCP connect the fetcher makes, as (family, sockaddr); still really connects."""
    seen = []
    real = M._connect

    def spy(family, sockaddr, timeout):
        seen.append((family, sockaddr))
        return real(family, sockaddr, timeout)

    monkeypatch.setattr(M, "_connect", spy)
    return seen


@pytest.fixture
def listener():
    srv = CountingListener()
    yield srv
    srv.close()


@pytest.fixture
def media_server():
    srv = MediaServer(routes={"/x.png": (200, {"Content-Type": "image/png"}, PNG)})
    yield srv
    srv.close()


def refused(url, **kw):
    """fetch_url must fail with THE one error; returns it."""
    kw.setdefault("timeout", (1.0, 1.0))
    with pytest.raises(MediaFetchFailed) as info:
        M.fetch_url(url, kw.pop("max_bytes", 10_000), **kw)
    err = info.value
    assert (err.code, err.http_status, err.message, err.details) == ("media_fetch_failed", 422, MSG, {"url": url})
    return err


# ---------------------------------------------------------------------------------------------
# unit: numeric spellings and address classes

LOOPBACK_SPELLINGS = [
    "127.0.0.1", "localhost", "2130706433", "0177.0.0.1", "0x7f.1", "0x7f.0.0.1", "127.1", "127.0.1",
    "0x7f000001", "017700000001", "0177.1", "127.0.0.1.", "LOCALHOST", "[::1]", "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]", "[0:0:0:0:0:ffff:127.0.0.1]", "[::127.0.0.1]", "[2002:7f00:1::]", "[64:ff9b::7f00:1]",
    "0", "0.0.0.0", "[::]",
]


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_every_spelling_of_loopback_is_refused_and_nothing_connects(scheme, listener, connects):
    resolver = Resolver(real=True)  # the system resolver, wrapped: we see which hosts reach it
    for host in LOOPBACK_SPELLINGS:
        url = f"{scheme}://{host}:{listener.port}/x.png?token=abc"
        refused(url, resolver=resolver)
    assert connects == []
    assert listener.settle() == 0
    # numeric spellings are decoded by the proxy and never handed to a resolver; only names are
    assert sorted(set(resolver.calls)) == ["localhost"], resolver.calls
    print(f"\n[count] {len(LOOPBACK_SPELLINGS)} spellings x {scheme}: connections to 127.0.0.1 listener 0, "
          f"connect() calls 0")


def _teredo(server, client):
    return str(ipaddress.IPv6Address((0x20010000 << 96) | (int(ipaddress.IPv4Address(server)) << 64)
                                     | (int(ipaddress.IPv4Address(client)) ^ 0xFFFFFFFF)))


REFUSED_ADDRESSES = {
    "10.0.0.1": "private", "172.16.5.4": "private", "192.168.1.1": "private", "127.0.0.1": "loopback",
    "127.255.255.254": "loopback", "169.254.169.254": "link-local", "100.64.0.1": "CGNAT",
    "100.127.255.254": "CGNAT", "224.0.0.1": "multicast", "239.255.255.250": "multicast",
    "240.0.0.1": "reserved", "255.255.255.255": "reserved", "0.0.0.0": "unspecified", "0.1.2.3": "unspecified",
    "192.0.2.1": "private", "198.18.0.1": "private", "192.0.0.8": "not global", "3fff::1": "not global",
    "::1": "loopback", "::": "unspecified", "fe80::1": "link-local", "fc00::1": "private", "fd12:3456::1": "private",
    "ff02::1": "multicast", "fec0::1": "site-local", "::ffff:10.0.0.1": "IPv4-mapped",
    "::ffff:127.0.0.1": "IPv4-mapped", "::ffff:169.254.169.254": "IPv4-mapped", "::10.0.0.1": "IPv4-compatible",
    "2002:c0a8:101::1": "6to4", "2002:7f00:1::": "6to4", "2002:a9fe:a9fe::": "6to4",
    _teredo("65.54.227.120", "10.0.0.1"): "Teredo", _teredo("65.54.227.120", "127.0.0.1"): "Teredo",
    "64:ff9b::a00:1": "NAT64", "64:ff9b:1::1": "NAT64", "2001:db8::1": "private",
}


@pytest.mark.parametrize("ip", sorted(REFUSED_ADDRESSES))
def test_address_class_refused_when_a_name_resolves_to_it(ip, connects):
    why = M.address_refusal(ip)
    assert why and REFUSED_ADDRESSES[ip] in why, (ip, why)
    resolver = Resolver({"media.example": [[ip]]})
    refused("http://media.example/x.png", resolver=resolver)
    refused("https://media.example/x.png", resolver=resolver)
    assert connects == []


@pytest.mark.parametrize("ip", ["169.254.169.254", "224.0.0.1", "0.0.0.0", "::", "fe80::1", "240.0.0.1",
                                "::ffff:127.0.0.1"])
def test_the_escape_hatch_never_opens_link_local_multicast_reserved_unspecified(ip, connects):
    assert M.address_refusal(ip, allow_private=True)
    refused("http://media.example/x.png", resolver=Resolver({"media.example": [[ip]]}), allow_private=True)
    assert connects == []


def test_one_refused_answer_among_public_ones_refuses_the_host(connects):
    resolver = Resolver({"media.example": [["93.184.215.14", "10.0.0.7", "2606:2800:21f::1"]]})
    refused("http://media.example/x.png", resolver=resolver)
    assert connects == []


def test_malformed_and_other_schemes_are_refused_without_a_lookup(connects):
    resolver = Resolver(real=True)
    for url in ["ftp://media.example/x.png", "file:///etc/passwd", "gopher://127.0.0.1:70/_x",
                "http://user:pw@media.example/x.png", "http://999.1.1.1/x", "http://1.2.3.4.5/x",
                "http://08.0.0.1/x", "http:///x.png", "http://[::1/x", "http://media example/x",
                "http://127.0.0.1%00.media.example/x"]:
        refused(url, resolver=resolver)
    assert (connects, resolver.calls) == ([], [])


def test_public_address_is_the_one_connected_to(monkeypatch):
    """The pinned address is what connect() gets: no second lookup anywhere in the stack."""
    seen = []

    def fake_connect(family, sockaddr, timeout):
        seen.append(sockaddr)
        raise ConnectionRefusedError("simulated")

    monkeypatch.setattr(M, "_connect", fake_connect)
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: pytest.fail("a second DNS lookup happened"))
    resolver = Resolver({"media.example": [["93.184.215.14"], ["127.0.0.1"]]})
    refused("https://media.example/x.png", resolver=resolver)
    assert seen == [("93.184.215.14", 443)]
    assert resolver.calls == ["media.example"]


# ---------------------------------------------------------------------------------------------
# against local servers: fetch, redirects, DNS rebinding, allow-list, size cap, deadline

def test_allowed_host_fetch_keeps_the_host_header(media_server):
    resolver = Resolver({"media.example": [[PUBLIC_SIM]]})
    body, ctype = M.fetch_url(media_server.url("/x.png"), 10_000, (1, 1), resolver=resolver,
                              allow_private=[PUBLIC_SIM])
    assert (body, ctype) == (PNG, "image/png")
    assert media_server.requests == [("/x.png", f"media.example:{media_server.port}")]


def test_scoped_escape_hatch_covers_only_its_addresses(listener, connects):
    refused(f"http://127.0.0.1:{listener.port}/x.png", allow_private=[PUBLIC_SIM])
    assert connects == [] and listener.settle() == 0


@pytest.mark.parametrize("target", ["http://127.0.0.1:{port}/secret", "http://2130706433:{port}/secret",
                                    "http://localhost:{port}/secret", "http://[::ffff:127.0.0.1]:{port}/secret",
                                    "http://0x7f.1:{port}/secret", "http://internal.example:{port}/secret"])
def test_redirect_from_allowed_host_into_loopback_is_refused(target, media_server, listener, connects):
    location = target.format(port=listener.port)
    media_server.routes["/x.png"] = (302, {"Location": location}, b"")
    resolver = Resolver({"media.example": [[PUBLIC_SIM]], "internal.example": [["127.0.0.1"]],
                         "localhost": [["127.0.0.1"]]})
    refused(media_server.url("/x.png"), resolver=resolver, allow_private=[PUBLIC_SIM])
    assert [p for p, _ in media_server.requests] == ["/x.png"]  # the first hop really happened
    assert [sa[0] for _, sa in connects] == [PUBLIC_SIM]
    assert listener.settle() == 0
    print(f"\n[count] redirect to {location}: media host requests 1, connections to 127.0.0.1 listener 0")


def test_redirects_are_followed_by_hand_up_to_three(media_server):
    media_server.routes.update({"/r1": (301, {"Location": "/r2"}, b""), "/r2": (302, {"Location": "/r3"}, b""),
                                "/r3": (307, {"Location": "/x.png"}, b""), "/r0": (308, {"Location": "/r1"}, b""),
                                "/ftp": (302, {"Location": "ftp://media.example/x.png"}, b"")})
    resolver = Resolver({"media.example": [[PUBLIC_SIM]]})
    body, _ = M.fetch_url(media_server.url("/r1"), 10_000, (1, 1), resolver=resolver, allow_private=[PUBLIC_SIM])
    assert body == PNG
    assert len(resolver.calls) == 4  # resolved and checked again on every hop
    media_server.requests.clear()
    refused(media_server.url("/r0"), resolver=resolver, allow_private=[PUBLIC_SIM])  # 4 redirects
    assert [p for p, _ in media_server.requests] == ["/r0", "/r1", "/r2", "/r3"]
    refused(media_server.url("/ftp"), resolver=resolver, allow_private=[PUBLIC_SIM])


def test_dns_rebinding_never_reaches_the_rebound_address(connects):
    """media.example answers 127.0.0.2 first and 127.0.0.1 after; a listener waits on 127.0.0.1 on
    the very same port, so any second lookup + connect would land there."""
    for _ in range(20):
        media = MediaServer(routes={"/x.png": (200, {"Content-Type": "image/png"}, PNG),
                                    "/hop": (302, {"Location": "/x.png"}, b"")})
        try:
            trap = CountingListener("127.0.0.1", media.port)
            break
        except OSError:
            media.close()
    else:
        pytest.skip("could not get the same port on 127.0.0.1 and 127.0.0.2")
    try:
        resolver = Resolver({"media.example": [[PUBLIC_SIM], ["127.0.0.1"]]})
        body, _ = M.fetch_url(media.url("/x.png"), 10_000, (1, 1), resolver=resolver, allow_private=[PUBLIC_SIM])
        assert body == PNG and resolver.calls == ["media.example"]

        # a redirect to the same name makes a second lookup: it answers 127.0.0.1 and is refused
        resolver = Resolver({"media.example": [[PUBLIC_SIM], ["127.0.0.1"]]})
        refused(media.url("/hop"), resolver=resolver, allow_private=[PUBLIC_SIM])
        assert resolver.calls == ["media.example", "media.example"]
        assert [sa for _, sa in connects] == [(PUBLIC_SIM, media.port)] * 2
        assert trap.settle() == 0
        print(f"\n[count] DNS rebinding on port {media.port}: connections to 127.0.0.1 0, to {PUBLIC_SIM} 2")
    finally:
        trap.close()
        media.close()


def test_media_hosts_allow_list(media_server, connects):
    allow = ("media.example", "*.cdn.example")
    assert M.host_allowed("media.example", allow) and M.host_allowed("MEDIA.example.", allow)
    assert M.host_allowed("a.cdn.example", allow) and M.host_allowed("a.b.cdn.example", allow)
    assert not M.host_allowed("cdn.example", allow)  # the pattern covers subdomains, not the apex
    assert not M.host_allowed("evilcdn.example", allow) and not M.host_allowed("media.example.evil", allow)
    assert M.host_allowed("anything.example", ())

    resolver = Resolver({"media.example": [[PUBLIC_SIM]], "other.example": [[PUBLIC_SIM]]})
    kw = {"resolver": resolver, "allow_private": [PUBLIC_SIM], "media_hosts": allow}
    assert M.fetch_url(media_server.url("/x.png"), 10_000, (1, 1), **kw)[0] == PNG
    resolver.calls.clear()
    connects.clear()
    refused(media_server.url("/x.png", host="other.example"), **kw)
    assert (resolver.calls, connects) == ([], [])  # refused before any lookup
    media_server.routes["/away"] = (302, {"Location": media_server.url("/x.png", host="other.example")}, b"")
    media_server.requests.clear()
    refused(media_server.url("/away"), **kw)
    assert [p for p, _ in media_server.requests] == ["/away"]  # the redirect target is checked too


def test_site_profile_media_hosts():
    p = _profile("s", {"url": "https://wp.test/", "user": "u", "app_password": "pw",
                       "media_hosts": ["Images.Example.com.", "*.cdn.example"]}, {})
    assert p.media_hosts == ("images.example.com", "*.cdn.example")
    assert _profile("s", {"url": "https://wp.test", "user": "u", "app_password": "pw"}, {}).media_hosts == ()
    for bad in ["images.example.com", ["http://x.example/"], ["*"], ["a*.example"], [""], [3], ["x.example:8080"]]:
        with pytest.raises(ValueError):
            _profile("s", {"url": "https://wp.test", "user": "u", "app_password": "pw", "media_hosts": bad}, {})
    with pytest.raises(AttributeError):  # still frozen
        p.media_hosts = ()
    assert "pw" not in repr(SiteProfile("s", "u", "x", "pw", ("a.example",)))


def _chunked(handler, total):
    handler.send_response(200)
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    for _ in range(total // 500):
        handler.wfile.write(b"1f4\r\n" + b"y" * 500 + b"\r\n")
    handler.wfile.write(b"0\r\n\r\n")


def test_size_cap_with_and_without_content_length(media_server):
    media_server.routes.update({"/big": (200, {}, b"z" * 2000), "/exact": (200, {}, b"z" * 1000),
                                "/chunked-big": lambda h: _chunked(h, 5000),
                                "/chunked-ok": lambda h: _chunked(h, 1000)})
    kw = {"resolver": Resolver({"media.example": [[PUBLIC_SIM]]}), "allow_private": [PUBLIC_SIM], "max_bytes": 1000}
    refused(media_server.url("/big"), **kw)
    refused(media_server.url("/chunked-big"), **kw)
    assert M.fetch_url(media_server.url("/exact"), 1000, (1, 1), resolver=kw["resolver"],
                       allow_private=[PUBLIC_SIM])[0] == b"z" * 1000
    assert M.fetch_url(media_server.url("/chunked-ok"), 1000, (1, 1), resolver=kw["resolver"],
                       allow_private=[PUBLIC_SIM])[0] == b"y" * 1000


def test_total_deadline_cuts_a_slow_drip(media_server):
    def drip(handler):
        handler.send_response(200)
        handler.send_header("Content-Length", "1000")
        handler.end_headers()
        try:
            for _ in range(100):
                handler.wfile.write(b"d")
                handler.wfile.flush()
                time.sleep(0.1)
        except OSError:
            pass

    media_server.routes["/drip"] = drip
    started = time.monotonic()
    refused(media_server.url("/drip"), resolver=Resolver({"media.example": [[PUBLIC_SIM]]}),
            allow_private=[PUBLIC_SIM], timeout=(1, 1), total_timeout=0.8)
    assert time.monotonic() - started < 2.5  # each read is well inside the read timeout; the deadline won


def test_the_log_says_why_without_query_or_credentials(caplog):
    with caplog.at_level(logging.INFO, logger="durable_ledger.proxy.media"):
        refused("http://127.0.0.1:9/x.png?sig=SECRET-SIG")
    text = caplog.text
    assert "loopback" in text and "http://127.0.0.1:9/x.png" in text and "SECRET-SIG" not in text


# ---------------------------------------------------------------------------------------------
# through the real proxy app

@pytest.fixture
def proxy_app(tmp_path, monkeypatch):
    """create_proxy_app with the real ledger authenticator (SQLite) and a site whose 'WordPress'
    is a counting listener: the test also proves WordPress was never contacted."""
    monkeypatch.delenv("DURABLE_PROXY_MEDIA_ALLOW_PRIVATE", raising=False)
    wordpress = CountingListener()
    made = []
    seq = itertools.count()

    def make(**config):
        app = create_proxy_app({
            "sites": {"test": {"url": f"http://127.0.0.1:{wordpress.port}", "user": "u", "app_password": "pw"}},
            "ledger": Config(database_url=f"sqlite:///{tmp_path / 'ledger.db'}",
                             bootstrap_tokens="acme:runner:runner-token:test", log_level="WARNING"),
            "connect_timeout": 1, "read_timeout": 0.5, **config})
        app.testing = True
        made.append(app)
        client = app.test_client()

        def post(url):
            # A write the ledger dispatched (the proxy refuses any other before fetching anything).
            write = {"url": url, "filename": "x.png"}
            with db.connection_context():
                jobs.create_or_get_job("acme", "job-m")
                token = leases.acquire_lease("acme", "job-m", "w", 600)[1].fencing_token
                out = answer_dict(gate.begin(Principal("acme", "runner", "t"), "job-m",
                                             f"upload_media:{len(made)}-{next(seq)}", token, payload=write,
                                             target="wordpress:test"))
            assert out["decision"] == "dispatch", out
            return client.post("/v1/sites/test/media", headers={"Authorization": "Bearer runner-token"},
                               json={"operation_key": out["operation"]["operation_key"], "job_id": "job-m",
                                     "fencing_token": token, **write})
        return app, post

    yield make, wordpress
    wordpress.close()


def test_proxy_refuses_loopback_media_url_and_never_connects(proxy_app, listener):
    make, wordpress = proxy_app
    app, post = make()
    assert app.config["PROXY_MEDIA_ALLOW_PRIVATE"] is False
    url = f"http://127.0.0.1:{listener.port}/x.png"
    r = post(url)
    assert r.status_code == 422
    assert r.get_json()["error"] == {"code": "media_fetch_failed", "message": MSG, "details": {"url": url}}
    # Every other spelling: the fetcher's one error, or (before any fetch) the request schema's
    # syntax check of `url` for spellings it does not parse as a URL at all (0177.0.0.1, 127.1 ...).
    kinds = {"media_fetch_failed": 0, "validation_error": 0}
    for host in LOOPBACK_SPELLINGS:
        url = f"http://{host}:{listener.port}/x.png"
        r = post(url)
        err = r.get_json()["error"]
        assert r.status_code == 422, (host, err)
        if err["code"] == "validation_error":
            assert err["details"] == {"url": ["Not a valid URL."]}, (host, err)
        else:
            assert err == {"code": "media_fetch_failed", "message": MSG, "details": {"url": url}}, host
        kinds[err["code"]] += 1
    assert listener.settle() == 0
    assert wordpress.settle() == 0
    print(f"\n[count] POST media url=http://127.0.0.1:{listener.port}/x.png: 422 media_fetch_failed; "
          f"{len(LOOPBACK_SPELLINGS)} other spellings: {kinds}; connections to listener 0, to WordPress 0")


def test_proxy_answers_one_identical_error_for_every_failure(proxy_app, listener, media_server):
    """Refused address, closed port, accept-and-hang (timeout), 404, too large, redirect loop:
    byte-identical bodies once the echoed URL is taken out. No open/closed port oracle."""
    make, wordpress = proxy_app
    app, post = make(media_allow_private=[PUBLIC_SIM], max_media_bytes=1000)
    media_server.routes.update({"/big": (200, {}, b"z" * 5000), "/loop": (302, {"Location": "/loop"}, b"")})
    closed = socket.socket()
    closed.bind((PUBLIC_SIM, 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    hang = socket.socket()
    hang.bind((PUBLIC_SIM, 0))
    hang.listen(8)  # accepts (kernel backlog) and never answers
    try:
        urls = {
            "refused address": f"http://127.0.0.1:{listener.port}/x.png",
            "closed port": f"http://{PUBLIC_SIM}:{closed_port}/x.png",
            "timeout": f"http://{PUBLIC_SIM}:{hang.getsockname()[1]}/x.png",
            "404": f"http://{PUBLIC_SIM}:{media_server.port}/missing.png",
            "too large": f"http://{PUBLIC_SIM}:{media_server.port}/big",
            "redirect loop": f"http://{PUBLIC_SIM}:{media_server.port}/loop",
            "bad scheme": "ftp://127.0.0.1/x.png",
        }
        bodies = {}
        for kind, url in urls.items():
            r = post(url)
            assert r.status_code == 422, (kind, r.get_json())
            bodies[kind] = r.get_data(as_text=True).replace(url, "<url>")
        if "validation_error" in bodies["bad scheme"]:
            bodies.pop("bad scheme")  # the request schema rejects non-http(s) before any fetch
        assert len(set(bodies.values())) == 1, bodies
        assert '"media_fetch_failed"' in next(iter(bodies.values()))
        # the fetch of an allowed address really happened (so the bodies compare real failures)
        assert {p for p, _ in media_server.requests} == {"/missing.png", "/big", "/loop"}
    finally:
        hang.close()
    assert listener.settle() == 0 and wordpress.settle() == 0


def test_escape_hatch_is_read_from_the_environment(proxy_app, monkeypatch):
    make, _ = proxy_app
    monkeypatch.setenv("DURABLE_PROXY_MEDIA_ALLOW_PRIVATE", "1")
    assert make()[0].config["PROXY_MEDIA_ALLOW_PRIVATE"] is True
    monkeypatch.setenv("DURABLE_PROXY_MEDIA_ALLOW_PRIVATE", "0")
    assert make()[0].config["PROXY_MEDIA_ALLOW_PRIVATE"] is False


def test_proxy_fetches_nothing_for_a_write_the_ledger_did_not_dispatch(proxy_app, listener):
    """Authorization comes before the fetch: an undispatched URL upload cannot even make the proxy connect."""
    make, wordpress = proxy_app
    app, _post = make(media_allow_private=True)
    r = app.test_client().post("/v1/sites/test/media", headers={"Authorization": "Bearer runner-token"}, json={
        "operation_key": "acme:job-x:v1:upload_media", "job_id": "job-x", "fencing_token": 1,
        "url": f"http://127.0.0.1:{listener.port}/x.png", "filename": "x.png"})
    assert (r.status_code, r.get_json()["error"]["code"]) == (403, "write_not_dispatched")
    assert listener.settle() == 0 and wordpress.settle() == 0
