"""Static checks on the WordPress plugin: PHP's linter on every PHP file we ship or run, and the
WordPress REST conventions (permission_callback on every route, a capability check behind it,
`args` with validate and sanitize callbacks for every path parameter)."""
import re
import subprocess

import pytest

from dist_support import REPO

PLUGIN = REPO / "ledger-service" / "durable_ledger" / "wordpress" / "durable-ops.php"
PHP_FILES = sorted([*(REPO / "ledger-service" / "durable_ledger" / "wordpress").glob("*.php"), *(REPO / "stack" / "wp").glob("*.php")])


@pytest.mark.parametrize("path", PHP_FILES, ids=lambda p: p.name)
def test_php_lint(path):
    proc = subprocess.run(["php", "-l", str(path)], text=True, capture_output=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _routes(src):
    """[(route, options text)] of each register_rest_route( 'ns', 'route', array(...) ) call."""
    out = []
    for m in re.finditer(r"register_rest_route\(\s*'([^']+)',\s*'([^']+)',", src):
        depth, i = 0, m.end()
        start = src.index("array(", i) + len("array")
        for j in range(start, len(src)):
            depth += src[j] == "("
            depth -= src[j] == ")"
            if depth == 0:
                out.append((m.group(2), src[start:j + 1]))
                break
    return out


def test_every_rest_route_has_a_permission_callback_with_a_capability_check_and_validated_args():
    src = PLUGIN.read_text()
    routes = _routes(src)
    assert len(routes) == 3
    for route, opts in routes:
        cb = re.search(r"'permission_callback'\s*=>\s*'([a-z_]+)'", opts)
        assert cb, f"{route}: no named permission_callback"
        assert cb.group(1) != "__return_true", route
        body = re.search(rf"function {cb.group(1)}\(\)\s*\{{(.*?)\n\}}", src, re.S).group(1)
        assert "current_user_can(" in body, f"{route}: permission callback checks no capability"
        for param in re.findall(r"\(\?P<([a-z_]+)>", route):
            assert re.search(rf"'args'\s*=>\s*array\(\s*'{param}'\s*=>\s*durable_ops_identifier_arg\(\)", opts), \
                f"{route}: path parameter {param} has no args schema"
    arg = re.search(r"function durable_ops_identifier_arg\(\)\s*\{(.*?)\n\}", src, re.S).group(1)
    assert "'validate_callback'" in arg and "'sanitize_callback'" in arg
    # guarded writes are gated by the core routes' own permission callbacks: the filter only runs
    # after them (rest_dispatch_request), never before (rest_pre_dispatch)
    assert "add_filter( 'rest_dispatch_request', 'durable_ops_dispatch'" in src
    assert "rest_pre_dispatch'" not in src
    assert "register_activation_hook( __FILE__, 'durable_ops_install' )" in src
