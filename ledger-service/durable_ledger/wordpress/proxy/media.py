"""Getting media bytes from a multipart upload, base64 JSON or a URL to fetch.

Fetching "by URL" is a server-side request on the caller's behalf, so it is fenced against SSRF
(see docs/proxy.md, "Media by URL"):
- http and https only, no user:password@ in the URL, optional per-site allow-list of hosts;
- the host is resolved once per hop (numeric spellings such as `2130706433`, `0x7f.1`, `0177.0.0.1`
  or `127.1` are parsed here, never handed to a resolver) and *every* resolved address must be
  public: loopback, private, link-local, multicast, reserved, unspecified, CGNAT, and IPv6 forms
  that embed such an IPv4 address (mapped, compatible, 6to4, Teredo, NAT64) are refused;
- the connection goes to the address that was checked (no second lookup, so no DNS-rebinding
  window); Host header, TLS SNI and certificate check use the original host name;
- redirects are followed by hand (at most 3), each hop checked with the same rules;
- size cap, connect/read timeouts and a total deadline.
Every refusal and every failure answers the same `media_fetch_failed` error; the real reason is
logged at INFO, without query string or credentials.
"""
from __future__ import annotations

import base64
import binascii
import http.client
import ipaddress
import logging
import mimetypes
import posixpath
import re
import socket
import ssl
import threading
import time
from urllib.parse import urljoin, urlsplit

from flask import current_app, has_app_context

from ... import __version__
from ...kernel.errors import MediaFetchFailed, ValidationFailed

log = logging.getLogger("durable_ledger.proxy.media")

FETCH_FAILED_MESSAGE = "the media URL could not be fetched"
MAX_REDIRECTS = 3
TOTAL_TIMEOUT_S = 60.0
REDIRECT_STATUSES = (301, 302, 303, 307, 308)
_CHUNK = 65536

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")          # well-known prefix: last 32 bits are IPv4
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215 local-use translation
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")       # deprecated ::a.b.c.d
# IANA special-purpose blocks that are not globally reachable, for Pythons whose ipaddress
# `is_global` still calls them global (3.11 does for 192.0.0.8, 3fff::/20, 5f00::/16 ...).
_SPECIAL = tuple(ipaddress.ip_network(n) for n in (
    "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
    "100::/64", "2001::/23", "2001:db8::/32", "3fff::/20", "5f00::/16", "fc00::/7"))
_NUMERIC_PART = re.compile(r"0x[0-9a-f]*|[0-9]+", re.IGNORECASE)
_HOST_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*")


class _Refused(Exception):
    """Internal: why a fetch did not happen or failed; only ever logged, never answered."""


def _safe_url(url: str) -> str:
    """scheme://host[:port]/path for logs: no user:password, no query string, no fragment."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path}"
    except ValueError:
        return "(unparseable URL)"


def _numeric_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """inet_aton's spellings: a, a.b, a.b.c, a.b.c.d with decimal, 0octal or 0xhex parts.

    `2130706433`, `0177.0.0.1`, `0x7f.1` and `127.1` all mean 127.0.0.1 to the C resolver; they
    are decoded here so that they are checked as the address they are (and never resolved).
    """
    parts = host.split(".")
    if parts and parts[-1] == "" and len(parts) > 1:
        parts = parts[:-1]  # "127.0.0.1." is the same address
    if not 1 <= len(parts) <= 4:
        return None
    nums = []
    for part in parts:
        try:
            if part[:2].lower() == "0x":
                nums.append(int(part[2:] or "0", 16))
            elif len(part) > 1 and part.startswith("0"):
                nums.append(int(part, 8))
            elif part.isdigit():
                nums.append(int(part, 10))
            else:
                return None
        except ValueError:
            return None
    *head, last = nums
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(nums)):
        return None
    value = 0
    for n in head:
        value = value * 256 + n
    value = value * 256 ** (5 - len(nums)) + last
    return ipaddress.IPv4Address(value)


def _literal_address(host: str):
    """The address a numeric host names (IPv6 literal, any IPv4 spelling), or None for a name.

    A host whose dot-separated parts are all numbers (decimal, 0octal, 0xhex) is numeric; if it
    is not a valid inet_aton spelling (`999.1.1.1`, `1.2.3.4.5`, `08`) it is refused outright.
    """
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host.split("%", 1)[0])
        except ValueError as exc:
            raise _Refused("malformed IPv6 literal") from exc
    parts = host.split(".")
    if all(_NUMERIC_PART.fullmatch(p) for p in parts):
        addr = _numeric_ipv4(host)
        if addr is None:
            raise _Refused("malformed numeric host")
        return addr
    return None


def _allowed_by(addr, allow_private) -> bool:
    """Does the operator's escape hatch cover this address? True = all non-public, or networks."""
    if allow_private is True:
        return True
    if not allow_private:
        return False
    for net in [allow_private] if isinstance(allow_private, str) else allow_private:
        if addr in ipaddress.ip_network(net, strict=False):
            return True
    return False


def address_refusal(addr, allow_private=False) -> str | None:
    """Why this address may not be fetched from (None: it may).

    Never allowed, even with `allow_private`: unspecified, 0.0.0.0/8, multicast, link-local
    (cloud metadata lives at 169.254.169.254), reserved (240/4 and broadcast; in IPv6 ::/8, which
    holds every IPv4-mapped and -compatible address), IPv6 site-local, local-use NAT64.
    Allowed only by `allow_private` (True, or a list of networks that contains the address):
    loopback, private (RFC 1918, unique-local fc00::/7), CGNAT 100.64/10, anything else not global.
    IPv6 addresses that carry an IPv4 address are judged by the IPv4 address as well.
    """
    addr = ipaddress.ip_address(addr.split("%", 1)[0]) if isinstance(addr, str) else addr
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.scope_id:
            addr = ipaddress.IPv6Address(str(addr).split("%", 1)[0])
        embedded = []
        if addr.ipv4_mapped is not None:
            embedded.append(("IPv4-mapped", addr.ipv4_mapped))
        elif addr in _IPV4_COMPATIBLE and int(addr) > 1:
            embedded.append(("IPv4-compatible", ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)))
        if addr.sixtofour is not None:
            embedded.append(("6to4", addr.sixtofour))
        if addr.teredo is not None:
            server, client = addr.teredo
            embedded += [("Teredo server", server), ("Teredo client", client)]
        if addr in _NAT64:
            embedded.append(("NAT64", ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)))
        if addr in _NAT64_LOCAL:
            return "local-use NAT64 prefix"
        for kind, v4 in embedded:
            why = address_refusal(v4, allow_private)
            if why:
                return f"{kind} address embedding {why}"
        if addr.is_site_local:
            return "site-local"
    if addr.is_unspecified or addr in _THIS_NETWORK:
        return "unspecified"
    if addr.is_multicast:
        return "multicast"
    if addr.is_link_local:
        return "link-local"
    if addr.is_loopback:  # before "reserved": ::1 sits in the reserved ::/8
        return None if _allowed_by(addr, allow_private) else "loopback"
    if addr.is_reserved:  # 240/4 with 255.255.255.255, IPv6 ::/8 (so every IPv4-mapped address) ...
        return "reserved"
    if _allowed_by(addr, allow_private):
        return None
    if addr in _CGNAT:
        return "CGNAT"
    if addr.is_private:
        return "private"
    if not addr.is_global or any(addr in net for net in _SPECIAL if net.version == addr.version):
        return "not global (special-purpose)"
    return None


def host_allowed(host: str, media_hosts) -> bool:
    """Empty allow-list: any host. Else an exact name, or `*.example.com` for its subdomains."""
    if not media_hosts:
        return True
    host = host.rstrip(".").lower()
    for pattern in media_hosts:
        pattern = pattern.rstrip(".").lower()
        if pattern.startswith("*."):
            if host.endswith(pattern[1:]):  # a subdomain at any depth, not the apex itself
                return True
        elif host == pattern:
            return True
    return False


def _resolve(host: str, port: int, resolver, allow_private):
    """[(family, sockaddr)] for a host whose every address passed the check; raises _Refused."""
    literal = _literal_address(host)
    if literal is not None:
        infos = [(socket.AF_INET6 if literal.version == 6 else socket.AF_INET, str(literal))]
    else:
        try:
            answers = resolver(host, port, 0, socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise _Refused(f"resolving failed ({type(exc).__name__})") from exc
        infos = [(fam, sa[0]) for fam, _type, _proto, _canon, sa in answers
                 if fam in (socket.AF_INET, socket.AF_INET6)]
        if not infos:
            raise _Refused("the host name has no address")
    checked = []
    for family, ip in infos:
        try:
            addr = ipaddress.ip_address(ip.split("%", 1)[0])
        except ValueError as exc:
            raise _Refused("the resolver answered something that is not an address") from exc
        why = address_refusal(addr, allow_private)
        if why:
            raise _Refused(f"address {addr} is {why}")  # one bad answer refuses the host
        sockaddr = (str(addr), port) if family == socket.AF_INET else (str(addr), port, 0, 0)
        if (family, sockaddr) not in checked:
            checked.append((family, sockaddr))
    return checked


def _connect(family, sockaddr, timeout):
    """Open a TCP connection to exactly this (already checked) address."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(sockaddr)
        return sock
    except BaseException:
        sock.close()
        raise


class _PinnedHTTP(http.client.HTTPConnection):
    """HTTP to a pinned address; Host header from the URL's host name."""

    def __init__(self, host, port, addresses, connect_timeout, deadline):
        super().__init__(host, port, timeout=connect_timeout)
        self._addresses, self._deadline = addresses, deadline

    def _open(self):
        last = None
        for family, sockaddr in self._addresses:
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                return _connect(family, sockaddr, min(self.timeout, remaining))
            except OSError as exc:
                last = exc
        raise last or TimeoutError("total deadline passed before connecting")

    def connect(self):
        self.sock = self._open()


class _PinnedHTTPS(_PinnedHTTP):
    """HTTPS to a pinned address; SNI and certificate check for the URL's host name."""

    default_port = http.client.HTTPS_PORT

    def __init__(self, host, port, addresses, connect_timeout, deadline, context=None):
        super().__init__(host, port, addresses, connect_timeout, deadline)
        self._context = context or ssl.create_default_context()

    def connect(self):
        self.sock = self._context.wrap_socket(self._open(), server_hostname=self.host)


def _split(url: str, media_hosts):
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise _Refused("malformed URL") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise _Refused(f"scheme {scheme or '(none)'} is not http or https")
    if parts.username is not None or parts.password is not None:
        raise _Refused("credentials in the URL")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise _Refused("no host")
    if ":" not in host:  # names go out as ASCII (IDNA); IPv6 literals stay as they are
        try:
            host = host.encode("idna").decode("ascii").lower()
        except UnicodeError as exc:
            raise _Refused("host name is not valid IDNA") from exc
        if not _HOST_NAME.fullmatch(host):
            raise _Refused("host name has characters a host name cannot have")
    if not host_allowed(host, media_hosts):
        raise _Refused(f"host {host} is not in the site's media_hosts")
    if port == 0:
        raise _Refused("port 0")
    port = port or (443 if scheme == "https" else 80)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return scheme, host, port, target


def fetch_url(url: str, max_bytes: int, timeout: tuple[float, float], *, media_hosts=(),
              allow_private=False, resolver=None, total_timeout: float = TOTAL_TIMEOUT_S,
              max_redirects: int = MAX_REDIRECTS, ssl_context=None) -> tuple[bytes, str | None]:
    """GET a media URL without SSRF: (content, content type) or MediaFetchFailed (always the same).

    timeout: (connect, read) seconds per socket operation; total_timeout bounds the whole fetch,
    redirects included. media_hosts: the site profile's allow-list (empty: any public host).
    allow_private: operator escape hatch for tests/dev (True, or a list of networks): loopback,
    private and CGNAT addresses pass; link-local, multicast, reserved and unspecified never do.
    resolver: getaddrinfo-compatible (tests inject one); called once per hop.
    """
    resolver = resolver or socket.getaddrinfo
    connect_timeout, read_timeout = (timeout, timeout) if isinstance(timeout, (int, float)) else timeout
    deadline = time.monotonic() + total_timeout
    current = url
    try:
        for hop in range(max_redirects + 1):
            scheme, host, port, target = _split(current, media_hosts)
            addresses = _resolve(host, port, resolver, allow_private)
            status, location, body, ctype = _get_once(scheme, host, port, target, addresses, max_bytes,
                                                      connect_timeout, read_timeout, deadline, ssl_context)
            if status == 200:
                return body, ctype
            if status in REDIRECT_STATUSES and location:
                if hop == max_redirects:
                    raise _Refused(f"more than {max_redirects} redirects")
                current = urljoin(current, location)
                log.info("media fetch: redirect %d from %s to %s", hop + 1, _safe_url(url), _safe_url(current))
                continue
            raise _Refused(f"answered HTTP {status}")
        raise _Refused("redirect loop")  # not reached: the loop returns or raises
    except _Refused as exc:
        reason = str(exc)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        reason = f"{type(exc).__name__} while fetching"
    except Exception as exc:  # a bug here must not become a different answer (an oracle) either
        log.warning("media fetch: unexpected %s (url %s)", type(exc).__name__, _safe_url(url), exc_info=True)
        reason = f"unexpected {type(exc).__name__}"
    log.info("media fetch refused or failed: %s (url %s, hop %s)", reason, _safe_url(url), _safe_url(current))
    raise MediaFetchFailed(FETCH_FAILED_MESSAGE, {"url": url})


def _get_once(scheme, host, port, target, addresses, max_bytes, connect_timeout, read_timeout, deadline,
              ssl_context):
    """One GET on a pinned connection: (status, Location, body or None, content type)."""
    if scheme == "https":
        conn = _PinnedHTTPS(host, port, addresses, connect_timeout, deadline, ssl_context)
    else:
        conn = _PinnedHTTP(host, port, addresses, connect_timeout, deadline)
    # A watchdog enforces the total deadline even against a server that drips one byte per
    # read timeout (per-operation timeouts alone would never fire).
    watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), _abort, (conn,))
    watchdog.daemon = True
    watchdog.start()
    try:
        conn.connect()
        conn.sock.settimeout(read_timeout)
        conn.request("GET", target, headers={"User-Agent": f"durable-ledger-proxy/{__version__}",
                                             "Accept": "*/*"})
        resp = conn.getresponse()
        if resp.status != 200:
            return resp.status, resp.getheader("Location"), None, None
        length = resp.getheader("Content-Length")
        if length and length.strip().isdigit() and int(length) > max_bytes:
            raise _Refused(f"Content-Length {int(length)} is larger than {max_bytes} bytes")
        chunks, size = [], 0
        while True:
            if time.monotonic() >= deadline:
                raise _Refused("total deadline passed")
            chunk = resp.read1(_CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if size > max_bytes:
                raise _Refused(f"media is larger than {max_bytes} bytes")
            chunks.append(chunk)
        if time.monotonic() >= deadline:
            raise _Refused("total deadline passed")
        ctype = (resp.getheader("Content-Type") or "").split(";")[0].strip() or None
        return 200, None, b"".join(chunks), ctype
    finally:
        watchdog.cancel()
        conn.close()


def _abort(conn):
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def media_bytes(data: dict, upload, max_bytes: int, timeout, media_hosts=(),
                allow_private=None) -> tuple[bytes, str, str]:
    """(content, filename, mime_type) from exactly one source.

    media_hosts: the site profile's allow-list for `url`. allow_private: None = the app's
    PROXY_MEDIA_ALLOW_PRIVATE (DURABLE_PROXY_MEDIA_ALLOW_PRIVATE), off outside an app context.
    """
    sources = [s for s in ("upload" if upload else None, data.get("url") and "url",
                           data.get("content_base64") and "content_base64") if s]
    if len(sources) != 1:
        raise ValidationFailed("send exactly one of: a multipart 'file', 'url', 'content_base64'",
                               {"sources": sources})
    ctype = None
    if upload:
        content, filename, ctype = upload.read(max_bytes + 1), upload.filename, upload.mimetype
    elif data.get("url"):
        if allow_private is None:
            allow_private = current_app.config.get("PROXY_MEDIA_ALLOW_PRIVATE", False) if has_app_context() else False
        content, ctype = fetch_url(data["url"], max_bytes, timeout, media_hosts=media_hosts,
                                   allow_private=allow_private)
        filename = posixpath.basename(urlsplit(data["url"]).path)
    else:
        try:
            content = base64.b64decode(data["content_base64"], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValidationFailed("content_base64 is not valid base64", {}) from exc
        filename = None
    if len(content) > max_bytes:
        raise ValidationFailed(f"media is larger than {max_bytes} bytes", {"max_bytes": max_bytes})
    filename = data.get("filename") or filename
    if not filename:
        raise ValidationFailed("a filename is needed (WordPress derives the type from it)", {})
    mime = data.get("mime_type") or (ctype if ctype and ctype != "application/octet-stream" else None) \
        or mimetypes.guess_type(filename)[0] or "application/octet-stream"
    return content, filename, mime
