"""WordPress site profiles for the publishing proxy.

Sources, later ones win on name clashes:
1. `WORDPRESS_URL`, `WORDPRESS_USER`, `WORDPRESS_APP_PASSWORD` -> the profile `default`.
2. `DURABLE_PROXY_SITES`: path of a JSON file `{"test": {"url", "user", "app_password"}, ...}`.
3. `WORDPRESS_SITES`: the same JSON inline.
`WORDPRESS_APP_PASSWORD_FILE` (or `app_password_file` in a profile) reads the secret from a file.
A profile may name an environment variable instead of holding the secret:
`{"url": ..., "user": ..., "app_password_env": "WP_PROD_APP_PASSWORD"}` keeps the file secret-free.
`media_hosts` (optional): the hosts media may be fetched from "by URL" for this site, exact names
or `*.example.com` for subdomains; empty or absent = any public host (see docs/proxy.md).
"""
from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field

from ..client import WordPressClient


@dataclass(frozen=True)
class SiteProfile:
    name: str
    url: str
    user: str
    app_password: str = field(repr=False)  # never in repr, logs or responses
    media_hosts: tuple[str, ...] = ()  # allow-list for media by URL; empty = any public host


def _profile(name: str, spec: dict, env) -> SiteProfile:
    password = spec.get("app_password")
    if password is None and spec.get("app_password_env"):
        password = env.get(spec["app_password_env"])
    if password is None and spec.get("app_password_file"):
        # Docker/Kubernetes secrets: a file that a setup job wrote, never an env var or the repo.
        with open(spec["app_password_file"], encoding="utf-8") as f:
            password = f.read().strip()
    missing = [k for k, v in (("url", spec.get("url")), ("user", spec.get("user")), ("app_password", password)) if not v]
    if missing:
        raise ValueError(f"WordPress site profile '{name}' lacks {', '.join(missing)}")
    return SiteProfile(name, spec["url"].rstrip("/"), spec["user"], password,
                       _media_hosts(name, spec.get("media_hosts")))


def _media_hosts(name: str, hosts) -> tuple[str, ...]:
    """Lower-cased names or `*.suffix` patterns; anything else is a configuration error."""
    if hosts is None:
        return ()
    if isinstance(hosts, str) or not isinstance(hosts, (list, tuple)):
        raise ValueError(f"WordPress site profile '{name}': media_hosts must be a list of host names")
    out = []
    for host in hosts:
        bare = host[2:] if isinstance(host, str) and host.startswith("*.") else host
        if not isinstance(bare, str) or not bare.strip(".") or "*" in bare or "/" in bare or ":" in bare \
                or any(c.isspace() for c in bare):
            raise ValueError(f"WordPress site profile '{name}': media_hosts entry {host!r} is not a host "
                             "name or *.suffix pattern")
        out.append(host.rstrip(".").lower())
    return tuple(out)


def load_sites(env=None) -> dict[str, SiteProfile]:
    env = os.environ if env is None else env
    specs: dict[str, dict] = {}
    if env.get("WORDPRESS_URL"):
        specs["default"] = {"url": env.get("WORDPRESS_URL"), "user": env.get("WORDPRESS_USER"),
                            "app_password": env.get("WORDPRESS_APP_PASSWORD"),
                            "app_password_file": env.get("WORDPRESS_APP_PASSWORD_FILE")}
    if env.get("DURABLE_PROXY_SITES"):
        with open(env["DURABLE_PROXY_SITES"], encoding="utf-8") as f:
            specs.update(json.load(f))
    if env.get("WORDPRESS_SITES"):
        specs.update(json.loads(env["WORDPRESS_SITES"]))
    return {name: _profile(name, spec, env) for name, spec in specs.items()}


class SiteRegistry:
    """Profiles plus one WordPressClient (one requests.Session) per site, made on first use."""

    PLUGIN_TTL_S = 60.0  # how long a plugin detection result is trusted

    def __init__(self, sites: dict, connect_timeout: float = 5.0, read_timeout: float = 30.0):
        self.sites = {n: (s if isinstance(s, SiteProfile) else _profile(n, s, os.environ)) for n, s in sites.items()}
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._clients: dict[str, WordPressClient] = {}
        self._plugin: dict[str, tuple[bool, float]] = {}
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        return sorted(self.sites)

    def client(self, name: str) -> WordPressClient:
        with self._lock:
            if name not in self._clients:
                p = self.sites[name]
                self._clients[name] = WordPressClient(p.url, p.user, p.app_password,
                                                      connect_timeout=self.connect_timeout,
                                                      read_timeout=self.read_timeout)
            return self._clients[name]

    def has_plugin(self, name: str) -> bool:
        hit = self._plugin.get(name)
        if hit and time.monotonic() - hit[1] < self.PLUGIN_TTL_S:
            return hit[0]
        present = self.client(name).plugin_status() is not None
        self._plugin[name] = (present, time.monotonic())
        return present
