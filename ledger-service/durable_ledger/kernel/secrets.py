"""Secret detection for checkpoints and evidence: a checkpoint is evidence, never a vault.

Checkpoints end up in reports, agent prompts (the recovery packet) and review pages; a
credential written there leaks to everyone who can read a job. We refuse rather than redact
on write, so the caller learns about it (``find_secrets``), and redact on every read path that
shows stored evidence, and in log records (``redact``, ``redact_text``).

Two kinds of evidence: key names (normalised, so ``accessToken``, ``access-token`` and
``ACCESS_TOKEN`` are one name) and values matching a known credential format. Dict keys are
values too: ``{"sk_live_...": 1}`` leaks as well as ``{"k": "sk_live_..."}``. The value rules
follow the prefixes the issuers document (and that gitleaks / detect-secrets match on);
docs/api.md lists them.
"""

import base64
import binascii
import functools
import logging
import re

REDACTED = "[redacted]"

ALLOWED_KEYS = {"fencing_token", "max_tokens", "token_count", "prompt_tokens", "completion_tokens",
                "total_tokens", "input_tokens", "output_tokens", "max_tool_calls"}
# A key is a credential when one of its words is one of these...
SECRET_WORDS = {"password", "passwd", "pwd", "pass", "passphrase", "secret", "secrets", "token", "bearer", "jwt",
                "authorization", "credential", "credentials", "cookie", "apikey", "privatekey", "sessionkey"}
# ...or its words run together contain one of these (``apppassword``, ``xApiKey``, ``private_key``).
SECRET_COMPOUNDS = ("password", "passwd", "apikey", "privatekey", "secretkey", "accesstoken", "refreshtoken",
                    "authtoken", "apitoken", "clientsecret", "sessionkey", "authheader", "accesskeysecret")

# Every rule has to let prose through untouched: a summary, a title or an error message is
# refused or redacted only for a value no writer would type. tests/test_secrets_prose.py runs
# them over a corpus of real prose (Python's docs, Debian's, WordPress's and n8n's strings) and
# over generated credentials of every format.
#
# A WordPress application password (WP_Application_Passwords::generate_password:
# wp_generate_password(24, false), shown as six groups of four by chunk_split) is 24 random
# letters and digits. Six four-character words in a row are common in English ("Make your home
# more calm with"), so a match needs at least one group no prose word has the shape of (digits
# inside letters, an inner capital, ...; _WORD4 lists the shapes prose has) and both upper and
# lower case across the six (a spaced hex fingerprint has one case). Measured on 1,000,000
# passwords generated the way WordPress does (Python ``secrets``): 27 missed, 2.7e-5. The
# unspaced 24-character form is not matched: it is indistinguishable from any identifier.
_WORD4 = (r"(?:[A-Za-z][a-z]{3}|[a-z][A-Z][a-z]{2}|[A-Z]{3}[A-Za-z]|[A-Z]{2}(?:v[46]|[0-9]s)|[0-9]{4}"
          r"|[0-9]{1,3}[a-z]{1,3})")
_WP_APP_PASSWORD = (r"\b(?=[A-Za-z0-9]{4} )(?=[A-Za-z0-9 ]{0,28}[a-z])(?=[A-Za-z0-9 ]{0,28}[A-Z])"
                    rf"(?!{_WORD4}(?: {_WORD4}){{5}}\b)[A-Za-z0-9]{{4}}(?: [A-Za-z0-9]{{4}}){{5}}\b")
# Credentials in a URL, but not the placeholders documentation writes (user:password, <pass>).
_PLACEHOLDER = (r"(?i:(?:user(?:name)?|login|name|me):(?:pass(?:word)?|passwd|pwd|secret|\*+)@"
                r"|[^/\s:@]+:(?:<[^>\s]*>|\{+[^}\s]*\}+|\$\{?\w+\}?|\*+|%s)@)")

# (name, pattern). Patterns are joined into one regex for the common no-match case.
VALUE_RULES = [
    ("openai_or_anthropic_key", r"\bsk-(?:proj-|ant-|svcacct-|admin-)?(?=[a-z_\-]*[A-Z0-9])[A-Za-z0-9_\-]{16,}"),
    # After "bearer"/"basic" a word of prose ("bearer instruments", "a basic doGetDepends()") is
    # not a credential: a bearer token has a digit, an inner capital or a token symbol; a basic
    # credential is base64 of "user:password" (_CHECKS decodes it).
    ("bearer_credential", r"(?i:\bbearer\s+)(?=[A-Za-z0-9._~+/=\-]*(?:[0-9_~+/=]|[a-z][A-Z]))"
                          r"[A-Za-z0-9._~+/=\-]{8,}"),
    ("basic_credential", r"(?i:\bbasic\s+)(?:[A-Za-z0-9+/]{4})+(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?"
                         r"(?![A-Za-z0-9+/=])"),
    # The header with key material after it (past PEM/PGP header lines; newlines may be escaped
    # \n): documentation quotes the bare header ("-----BEGIN PRIVATE KEY----- KEY DATA GOES HERE").
    ("private_key_block", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:\s|\\[rn])+"
                          r"(?:[A-Za-z][A-Za-z-]*: [^\r\n\\]*(?:\s|\\[rn])+)*[A-Za-z0-9+/=]{20}"),
    ("durable_ledger_token", r"\bdl_(?=[a-z_\-]*[A-Z0-9])[A-Za-z0-9_\-]{20,}"),
    ("github_token", r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}"),
    ("github_fine_grained_pat", r"\bgithub_pat_[A-Za-z0-9_]{22,}"),
    ("gitlab_token", r"\bgl(?:pat|dt|rt|ptt|cbt|soat)-[A-Za-z0-9_\-]{20,}"),
    ("slack_token", r"\bxox[abeoprs]-[A-Za-z0-9\-]{10,}"),
    ("slack_app_token", r"\bxapp-\d-[A-Za-z0-9\-]{10,}"),
    ("slack_webhook", r"hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_/]{20,}"),
    ("aws_access_key_id", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    ("stripe_key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"),
    ("stripe_webhook_secret", r"\bwhsec_[A-Za-z0-9]{20,}"),
    ("google_api_key", r"\bAIza[0-9A-Za-z_\-]{30,}"),
    ("google_oauth_token", r"\bya29\.[0-9A-Za-z_\-]{20,}"),
    ("google_oauth_client_secret", r"\bGOCSPX-[A-Za-z0-9_\-]{20,}"),
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*"),
    ("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b"),
    ("pypi_token", r"\bpypi-AgE[A-Za-z0-9_\-]{50,}"),
    ("sendgrid_key", r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),
    ("twilio_api_key", r"\bSK[0-9a-f]{32}\b"),
    ("mailgun_key", r"\bkey-[0-9a-zA-Z]{32}\b"),
    ("mailchimp_key", r"\b[0-9a-f]{32}-us[0-9]{1,2}\b"),
    ("shopify_token", r"\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}\b"),
    ("digitalocean_token", r"\bdo[opr]_v1_[a-f0-9]{64}\b"),
    ("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}\b"),
    ("discord_webhook", r"discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_\-]{20,}"),
    ("telegram_bot_token", r"\b\d{8,10}:AA[A-Za-z0-9_\-]{33}(?![A-Za-z0-9_\-])"),
    ("square_token", r"\bsq0(?:atp|csp)-[A-Za-z0-9_\-]{22,}"),
    ("atlassian_api_token", r"\bATATT3[A-Za-z0-9_\-=]{50,}"),
    ("azure_storage_key", r"(?i:AccountKey=)[A-Za-z0-9+/=]{40,}"),
    ("postman_api_key", r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}\b"),
    ("linear_api_key", r"\blin_api_[A-Za-z0-9]{40}\b"),
    ("notion_token", r"\b(?:secret_[A-Za-z0-9]{43}|ntn_[A-Za-z0-9]{40,})\b"),
    ("vault_token", r"\bhv[sb]\.[A-Za-z0-9_\-]{24,}"),
    ("grafana_token", r"\b(?:glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/=]{32,})"),
    ("age_secret_key", r"\bAGE-SECRET-KEY-1[0-9A-Z]{58}\b"),
    ("wordpress_application_password", _WP_APP_PASSWORD),
    ("url_credentials", rf"://(?!{_PLACEHOLDER})[^/\s:@]+:[^/\s@]+@"),
]
_RULES = [(name, re.compile(p)) for name, p in VALUE_RULES]
_ANY = re.compile("|".join(f"(?P<{name}>{p})" for name, p in VALUE_RULES))


def _is_basic_credential(match):
    """RFC 7617: base64 of "user-id:password", printable text."""
    try:
        text = base64.b64decode(match.split()[-1], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return False
    return ":" in text and text.isprintable()


# Rules whose regex finds candidates that a check then confirms.
_CHECKS = {"basic_credential": _is_basic_credential}


def _credentials(text):
    """Matches of any rule in ``text`` that are credentials. A candidate a check turns down is
    not skipped over: a credential may start inside it ("Basic AKIA...")."""
    pos = 0
    while (m := _ANY.search(text, pos)) is not None:
        check = _CHECKS.get(m.lastgroup)
        if check is None or check(m.group(0)):
            yield m
            pos = max(m.end(), m.start() + 1)
        else:
            pos = m.start() + 1
_CAMEL = (re.compile(r"([A-Z]+)([A-Z][a-z])"), re.compile(r"([a-z0-9])([A-Z])"))
_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")


def key_words(key):
    """``accessToken`` / ``access-token`` / ``ACCESS_TOKEN`` -> ["access", "token"]."""
    for pattern in _CAMEL:
        key = pattern.sub(r"\1_\2", key)
    return [w for w in _SEPARATORS.split(key.lower()) if w]


def is_secret_key(key):
    if not isinstance(key, str):
        return False
    # Payload keys are a small vocabulary (title, status, ...) seen on every request; long ones
    # are not kept, so a body of odd keys cannot grow the cache beyond a few hundred kilobytes.
    return _is_secret_key(key) if len(key) <= 64 else _is_secret_key.__wrapped__(key)


@functools.lru_cache(maxsize=4096)
def _is_secret_key(key):
    if key.lower() in ALLOWED_KEYS:
        return False
    words = key_words(key)
    if any(w in SECRET_WORDS for w in words):
        return True
    compact = "".join(words)
    return any(c in compact for c in SECRET_COMPOUNDS)


def value_rule(text):
    """The name of the credential format ``text`` contains, or None: the format of the leftmost
    credential (the longest there, then the first rule). Not simply the first rule that matches:
    a SendGrid key's random part can hold ``-sk-...`` or start with ``sk-``, which alone would
    read as an OpenAI key."""
    if not isinstance(text, str) or not _ANY.search(text):
        return None
    best = None
    for name, pattern in _RULES:
        check = _CHECKS.get(name)
        m = next((m for m in pattern.finditer(text) if check is None or check(m.group(0))), None)
        if m is not None and (best is None or (m.start(), -len(m.group(0))) < best[0]):
            best = ((m.start(), -len(m.group(0))), name)
    return best[1] if best else None


def _present(value):
    return value not in (None, "", False, [], {})


def find_secrets(value, path="$"):
    """Yield (json_path, why) for every key or string that looks like a credential."""
    if isinstance(value, dict):
        for k, v in value.items():
            sub = f"{path}.{k}" if value_rule(k) is None else f"{path}.<key>"
            if value_rule(k) is not None:
                yield sub, f"a key looks like a {value_rule(k)}"
            if is_secret_key(k) and _present(v):
                yield sub, "key looks like a credential"
                continue
            yield from find_secrets(v, sub)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from find_secrets(v, f"{path}[{i}]")
    elif isinstance(value, str):
        rule = value_rule(value)
        if rule:
            yield path, f"value looks like a {rule}"


def redact_text(text):
    """``text`` with every credential-looking substring replaced by ``[redacted]``."""
    if not isinstance(text, str) or not _ANY.search(text):
        return text
    parts, pos = [], 0
    for m in _credentials(text):
        parts += [text[pos:m.start()], REDACTED]
        pos = m.end()
    return "".join(parts) + text[pos:] if parts else text


def redact(value):
    """A copy of ``value`` safe to show: credential keys' values and credential substrings
    (in values and in keys) replaced by ``[redacted]``."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            shown = redact_text(k) if isinstance(k, str) else k
            while shown in out:  # two keys that redact to the same text stay two entries
                shown = f"{shown}*"
            out[shown] = REDACTED if is_secret_key(k) and _present(v) else redact(v)
        return out
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


# In log lines only: a URL's credential-like query parameters (an n8n resume URL's signature).
_SECRET_QUERY = re.compile(r"([?&](?:signature|sig|token|access_token|api_key|apikey|key|secret)=)[^&\s\"'<>]+",
                           re.I)


class RedactingFilter(logging.Filter):
    """Log records at every level go out with credential-looking substrings redacted.

    Installed on the root logger's handlers by the app factory, so it covers records of every
    logger that propagates (ours, werkzeug's, waitress's)."""

    def filter(self, record):
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a broken format string is logged as it is
            return True
        redacted = redact_text(message)
        if _SECRET_QUERY.search(redacted):
            redacted = _SECRET_QUERY.sub(r"\1" + REDACTED, redacted)
        if redacted is not message:
            record.msg, record.args = redacted, None
        return True


def install_log_redaction(logger=None):
    logger = logger or logging.getLogger()
    for handler in logger.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
