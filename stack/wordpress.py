#!/usr/bin/env python3
"""Throwaway WordPress (6.1 from Debian 12, or a newer Debian build) + MariaDB for tests, make
targets and the demo.

    stack/wordpress.sh up   --state /tmp/x/wp.json [--port N] [--no-plugin] [--name NAME]
                            [--wp-version system|7.1.4|...] [--plugin-zip dist/durable-ops-X.zip]
    stack/wordpress.sh down --state /tmp/x/wp.json
    stack/wordpress.sh core --wp-version 7.1.4     # only fetch + cache that core; print its root

WordPress core: `system` (default; $DURABLE_WP_VERSION overrides) is Debian 12's package in
/usr/share/wordpress (6.1). Another version is Debian's architecture-independent `wordpress`
package of that version from trixie or sid, fetched with `apt-get download` through a private
apt configuration (the system's sources and packages are not touched) together with the
libraries it symlinks to (PHPMailer, getID3, a few JS libraries), unpacked with `dpkg-deb -x`
into $DURABLE_CACHE/wordpress-core-<version>/ (outside the clone, kept across CI runs). The
system PHP 8.2 runs it.

Plugin: the durable-ops mu-plugin by default; `--plugin-zip` instead installs the regular plugin
zip through WordPress's own plugin API (Plugin_Upgrader::install + activate_plugin, what
wp-admin's "Upload Plugin" does) on a site without the mu-plugin; `--no-plugin` neither.

`up` installs the Debian packages if missing, makes sure MariaDB answers, creates a uniquely
named database + user, writes /etc/wordpress/config-<name>.php, installs WordPress with a PHP
CLI script, copies the durable-ops mu-plugin (unless --no-plugin), creates an application
password and serves the site with `PHP_CLI_SERVER_WORKERS=4 php -S`. The state file (mode 600,
holds the app password: keep it in a temp dir, never commit it) is JSON with url, rest_url,
user, app_password, pid, db_name, ... and an `.env` twin with WORDPRESS_* variables.
`down` stops the server and drops everything `up` created. Stdlib only (system python3).
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from localhost import free_port  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PLUGIN = REPO / "ledger-service" / "durable_ledger" / "wordpress" / "durable-ops.php"
WP_ROOT = Path("/usr/share/wordpress")
PACKAGES = ["wordpress", "php-cli", "php-mysql", "mariadb-server"]
CACHE = Path(os.environ.get("DURABLE_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
             / "durable-steps")
# Newer WordPress builds come from these Debian suites (architecture-independent packages only).
NEWER_SUITES = ("trixie", "sid")
# What Debian's wordpress package symlinks into /usr/share/{php,javascript}: unpacked next to it.
CORE_LIBS = ["libphp-phpmailer", "php-getid3", "libjs-cropper", "libjs-underscore", "libjs-lodash", "libjs-jquery-ui"]
DB = ["mysql", "-h127.0.0.1", "-P3306", "-uroot", "--batch", "--skip-column-names"]


def log(msg: str) -> None:
    print(f"[wordpress] {msg}", file=sys.stderr, flush=True)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


# ---------------------------------------------------------------- packages / MariaDB

def php_has_mysqli() -> bool:
    if not shutil.which("php"):
        return False
    out = subprocess.run(["php", "-m"], text=True, capture_output=True).stdout
    return "mysqli" in out.split()


def ensure_packages() -> None:
    if (WP_ROOT / "wp-load.php").exists() and php_has_mysqli() and Path("/usr/sbin/mariadbd").exists():
        return
    log("installing Debian packages: " + " ".join(PACKAGES) + " (~35 s)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES], check=True, env=env)


def mariadb_alive() -> bool:
    return subprocess.run(["mysqladmin", "-h127.0.0.1", "-uroot", "ping"], capture_output=True).returncode == 0


def ensure_mariadb(timeout: float = 60.0) -> None:
    if mariadb_alive():
        return
    log("starting MariaDB")
    Path("/run/mysqld").mkdir(parents=True, exist_ok=True)
    shutil.chown("/run/mysqld", "mysql", "mysql")
    subprocess.run(["start-stop-daemon", "--start", "--oknodo", "--background", "--exec", "/usr/sbin/mariadbd"], check=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if mariadb_alive():
            return
        time.sleep(0.3)
    raise SystemExit("MariaDB did not answer on 127.0.0.1:3306")


def sql(statement: str) -> str:
    return run(DB + ["-e", statement]).stdout


# ---------------------------------------------------------------- WordPress core versions

def core_version(root: Path) -> str:
    m = re.search(r"\$wp_version = '([^']+)'", (root / "wp-includes" / "version.php").read_text())
    return m.group(1) if m else "unknown"


def _private_apt(workdir: Path) -> dict:
    """An apt configuration of its own (sources, lists, cache) for the newer suites: `apt-get
    update` / `download` with it leave the system's apt state alone."""
    (workdir / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (workdir / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    (workdir / "sources.list").write_text("".join(
        f"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian {suite} main\n"
        for suite in NEWER_SUITES))
    (workdir / "apt.conf").write_text(
        f'Dir::Etc::SourceList "{workdir}/sources.list";\nDir::Etc::SourceParts "/dev/null";\n'
        f'Dir::State::Lists "{workdir}/lists";\nDir::Cache "{workdir}/cache";\n'
        'APT::Sandbox::User "root";\n')
    return dict(os.environ, APT_CONFIG=str(workdir / "apt.conf"), DEBIAN_FRONTEND="noninteractive")


def ensure_core(version: str | None) -> Path:
    """The WordPress root for `version` (see the module docstring); fetched once, then cached."""
    version = (version or "system").strip()
    if version in ("", "system") or (WP_ROOT / "wp-load.php").exists() and core_version(WP_ROOT).startswith(version):
        ensure_packages()
        return WP_ROOT
    if not re.fullmatch(r"[0-9][0-9.]*", version):
        raise SystemExit(f"--wp-version {version!r}: expected `system` or a version like 7.1.4")
    home = CACHE / f"wordpress-core-{version}"
    root = home / "root" / "usr" / "share" / "wordpress"
    if (home / ".complete").exists():
        return root
    import fcntl
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".wordpress-core-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (home / ".complete").exists():
            return root
        t0 = time.monotonic()
        work = Path(tempfile.mkdtemp(prefix=f".wordpress-core-{version}.", dir=CACHE))
        try:
            env = _private_apt(work)
            log(f"fetching WordPress {version} from Debian {'/'.join(NEWER_SUITES)} (private apt config, download only)")
            subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, capture_output=True)
            madison = run(["apt-cache", "madison", "wordpress"], env=env).stdout
            debver = next((ln.split("|")[1].strip() for ln in madison.splitlines()
                           if ln.split("|")[1].strip().startswith(version + "+")), None)
            if debver is None:
                raise SystemExit(f"WordPress {version} is not in Debian {NEWER_SUITES}; there: {madison.strip()}")
            debs = work / "debs"
            debs.mkdir()
            subprocess.run(["apt-get", "download", "-qq", f"wordpress={debver}", *CORE_LIBS],
                           check=True, env=env, cwd=debs, capture_output=True)
            unpacked = work / "root"
            for deb in sorted(debs.glob("*.deb")):
                run(["dpkg-deb", "-x", str(deb), str(unpacked)])
            got = core_version(unpacked / "usr" / "share" / "wordpress")
            if got != version:
                raise SystemExit(f"the package {debver} holds WordPress {got}, not {version}")
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            (unpacked).rename(home / "root")
            (home / ".complete").write_text(f"wordpress {debver} + {' '.join(CORE_LIBS)} in "
                                            f"{time.monotonic() - t0:.1f} s on {time.strftime('%FT%TZ', time.gmtime())}\n")
            log(f"WordPress {version} ({debver}) cached in {home} in {time.monotonic() - t0:.1f} s")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return root


# ---------------------------------------------------------------- instance

def config_php(st: dict, db_password: str) -> str:
    keys = "\n".join(
        f"define('{k}', '{secrets.token_hex(32)}');"
        for k in ("AUTH_KEY", "SECURE_AUTH_KEY", "LOGGED_IN_KEY", "NONCE_KEY",
                  "AUTH_SALT", "SECURE_AUTH_SALT", "LOGGED_IN_SALT", "NONCE_SALT")
    )
    return f"""<?php
// Generated by stack/wordpress.py for a throwaway test instance; removed by `down`.
define('DB_NAME', '{st["db_name"]}');
define('DB_USER', '{st["db_user"]}');
define('DB_PASSWORD', '{db_password}');
define('DB_HOST', '127.0.0.1:3306');
define('DB_CHARSET', 'utf8mb4');
define('DB_COLLATE', '');
define('WP_HOME', '{st["url"]}');
define('WP_SITEURL', '{st["url"]}');
define('WP_CONTENT_DIR', '{st["content_dir"]}');
define('WP_CONTENT_URL', '{st["url"]}/wp-content');
define('WP_ENVIRONMENT_TYPE', 'local');  // application passwords over plain http
define('DISABLE_WP_CRON', true);         // no loopback cron requests during tests
define('WP_HTTP_BLOCK_EXTERNAL', true);  // no internet here: fail fast, never hang
define('AUTOMATIC_UPDATER_DISABLED', true);
define('WP_DEBUG', false);
define('FS_METHOD', 'direct');
{keys}
$table_prefix = 'wp_';
"""


def http_ok(url: str, auth: str | None = None, timeout: float = 5.0) -> bool:
    req = urllib.request.Request(url)
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def write_state(path: Path, st: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(st, f, indent=2)
    env = path.with_suffix(".env")
    fd = os.open(env, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"WORDPRESS_URL={st['url']}\nWORDPRESS_USER={st.get('user', '')}\n"
                f"WORDPRESS_APP_PASSWORD={st.get('app_password', '')}\n")


def up(args) -> dict:
    t0 = time.monotonic()
    state_path = Path(args.state).resolve()
    if state_path.exists():
        old = json.loads(state_path.read_text())
        if old.get("pid") and pid_alive(old["pid"]) and http_ok(old["rest_url"] + "/"):
            log(f"already running at {old['url']} (pid {old['pid']})")
            return old
        log("stale state file found: tearing the old instance down first")
        down_state(old)

    ensure_packages()
    wp_root = ensure_core(args.wp_version)
    ensure_mariadb()
    if args.plugin_zip and args.no_plugin:
        raise SystemExit("--plugin-zip and --no-plugin exclude each other")
    plugin_zip = Path(args.plugin_zip).resolve() if args.plugin_zip else None
    if plugin_zip and not plugin_zip.is_file():
        raise SystemExit(f"--plugin-zip {plugin_zip}: no such file (run `make dist`)")
    name = args.name or "dswp-" + secrets.token_hex(4)
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,30}", name):
        raise SystemExit("--name must match [a-z0-9][a-z0-9-]{0,30} (Debian WORDPRESS_CONFIG rule)")
    ident = name.replace("-", "_")
    port = args.port or free_port()
    base = Path(args.dir or tempfile.mkdtemp(prefix=f"durable-{name}-"))
    content = base / "wp-content"
    for sub in ("mu-plugins", "plugins", "themes", "uploads"):
        (content / sub).mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{port}"
    st = {
        "name": name, "url": url, "rest_url": f"{url}/?rest_route=", "port": port,
        "db_name": ident, "db_user": ident[:32], "config": f"/etc/wordpress/config-{name}.php",
        "instance_dir": str(base), "content_dir": str(content),
        "uploads_dir": str(content / "uploads"), "plugin": not args.no_plugin,
        "plugin_mode": "none" if args.no_plugin else ("zip" if plugin_zip else "mu"),
        "wp_root": str(wp_root), "wp_version": core_version(wp_root),
        "log": str(base / "php-server.log"), "state_file": str(state_path),
    }
    # Write a partial state early so `down` can clean up whatever a failed `up` left behind.
    write_state(state_path, st)

    log(f"database {st['db_name']} on 127.0.0.1:3306")
    db_password = secrets.token_urlsafe(18)
    sql(f"CREATE DATABASE IF NOT EXISTS `{st['db_name']}` CHARACTER SET utf8mb4;"
        f"CREATE USER IF NOT EXISTS '{st['db_user']}'@'%' IDENTIFIED BY '{db_password}';"
        f"ALTER USER '{st['db_user']}'@'%' IDENTIFIED BY '{db_password}';"
        f"GRANT ALL PRIVILEGES ON `{st['db_name']}`.* TO '{st['db_user']}'@'%';")
    cfg = Path(st["config"])
    cfg.write_text(config_php(st, db_password))
    cfg.chmod(0o640)

    if st["plugin_mode"] == "mu":
        shutil.copy2(PLUGIN, content / "mu-plugins" / "durable-ops.php")
        log("mu-plugin durable-ops.php installed")
    elif st["plugin_mode"] == "zip":
        log(f"no mu-plugin: the plugin zip {plugin_zip.name} is installed through the plugin API after install")
    else:
        log("no mu-plugin (--no-plugin): plain WordPress")

    log(f"installing WordPress {st['wp_version']} from {wp_root}")
    env = dict(os.environ, WORDPRESS_CONFIG=name, DURABLE_WP_URL=url, DURABLE_WP_ROOT=str(wp_root),
               DURABLE_WP_ADMIN_PASSWORD=secrets.token_urlsafe(18))
    st.update(php_json(HERE / "wp" / "install.php", env))
    if plugin_zip:
        st["plugin_install"] = wp_plugin(st, "install", str(plugin_zip))
        log(f"plugin {st['plugin_install']['plugin']} installed and activated through Plugin_Upgrader")

    log(f"serving {url} with PHP_CLI_SERVER_WORKERS=4")
    server_env = dict(os.environ, PHP_CLI_SERVER_WORKERS="4", DURABLE_WP_CONFIG=name,
                      DURABLE_WP_CONTENT_DIR=str(content))
    with open(st["log"], "ab") as logf:
        proc = subprocess.Popen(
            ["php", "-d", "upload_max_filesize=64M", "-d", "post_max_size=64M", "-d", "memory_limit=256M",
             "-S", f"127.0.0.1:{port}", "-t", str(wp_root), str(HERE / "wp" / "router.php")],
            stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=server_env, start_new_session=True, cwd=str(base))
    st["pid"] = proc.pid
    write_state(state_path, st)

    auth = f"{st['user']}:{st['app_password']}"
    deadline = time.monotonic() + 30
    while not http_ok(f"{st['rest_url']}/wp/v2/users/me", auth):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"WordPress did not become ready; see {st['log']}")
        time.sleep(0.1)
    if st["plugin"] and not http_ok(f"{st['rest_url']}/durable/v1/status", auth):
        raise SystemExit("durable-ops plugin status route does not answer")
    st["boot_seconds"] = round(time.monotonic() - t0, 2)
    write_state(state_path, st)
    log(f"ready at {url} in {st['boot_seconds']} s; state in {state_path}")
    return st


def php_json(script: Path, env: dict, *args: str) -> dict:
    """Runs a PHP CLI script that prints one `DURABLE_JSON {...}` line; returns that object."""
    proc = subprocess.run(["php", str(script), *args], text=True, capture_output=True, env=env)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("DURABLE_JSON ")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"{script.name} {' '.join(args)} failed ({proc.returncode}):\n"
                         f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return json.loads(line[len("DURABLE_JSON "):])


def wp_plugin(st: dict, action: str, *args: str) -> dict:
    """stack/wp/plugin.php ACTION against the instance `st` (install ZIP | status | uninstall)."""
    env = dict(os.environ, WORDPRESS_CONFIG=st["name"], DURABLE_WP_URL=st["url"], DURABLE_WP_ROOT=st["wp_root"])
    return php_json(HERE / "wp" / "plugin.php", env, action, *args)


# ---------------------------------------------------------------- teardown

def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def stop_server(pid: int) -> None:
    # The server was started in its own session (start_new_session): its pid is the group id,
    # and the group holds the 4 worker processes too.
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 2.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            if not pid_alive(pid):
                return
            time.sleep(0.05)


def down_state(st: dict) -> None:
    if st.get("pid"):
        log(f"stopping php server pid {st['pid']}")
        stop_server(int(st["pid"]))
    if st.get("db_name") and mariadb_alive():
        log(f"dropping database {st['db_name']}")
        sql(f"DROP DATABASE IF EXISTS `{st['db_name']}`; DROP USER IF EXISTS '{st['db_user']}'@'%';")
    if st.get("config", "").startswith("/etc/wordpress/config-"):
        Path(st["config"]).unlink(missing_ok=True)
    inst = st.get("instance_dir")
    if inst and Path(inst).name.startswith("durable-"):
        shutil.rmtree(inst, ignore_errors=True)


def down(args) -> None:
    state_path = Path(args.state)
    if not state_path.exists():
        log(f"no state file {state_path}: nothing to do")
        return
    down_state(json.loads(state_path.read_text()))
    state_path.unlink(missing_ok=True)
    state_path.with_suffix(".env").unlink(missing_ok=True)
    log("down")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    pu = sub.add_parser("up")
    pu.add_argument("--state", required=True, help="JSON state file to write (keep it in a temp dir)")
    pu.add_argument("--port", type=int)
    pu.add_argument("--name", help="instance name [a-z0-9-], default dswp-<random>")
    pu.add_argument("--dir", help="instance directory (default: a new temp dir)")
    pu.add_argument("--no-plugin", action="store_true", help="plain WordPress without durable-ops")
    pu.add_argument("--plugin-zip", help="install this regular plugin zip through the plugin API instead of the mu-plugin")
    pu.add_argument("--wp-version", default=os.environ.get("DURABLE_WP_VERSION", "system"),
                    help="system (Debian 12's 6.1, default) or a newer Debian-packaged version, e.g. 7.1.4")
    pd = sub.add_parser("down")
    pd.add_argument("--state", required=True)
    pc = sub.add_parser("core", help="fetch and cache a WordPress core; print its root")
    pc.add_argument("--wp-version", default=os.environ.get("DURABLE_WP_VERSION", "system"))
    pp = sub.add_parser("plugin", help="run stack/wp/plugin.php ACTION [ARG] on a running instance")
    pp.add_argument("--state", required=True)
    pp.add_argument("action", choices=["install", "status", "uninstall"])
    pp.add_argument("arg", nargs="?")
    args = p.parse_args(argv)
    if args.cmd == "core":
        root = ensure_core(args.wp_version)
        print(json.dumps({"root": str(root), "version": core_version(root)}))
    elif args.cmd == "plugin":
        st = json.loads(Path(args.state).read_text())
        print(json.dumps(wp_plugin(st, args.action, *([args.arg] if args.arg else []))))
    elif args.cmd == "up":
        st = up(args)
        print(json.dumps({k: v for k, v in st.items() if k != "app_password"}))
    else:
        down(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
