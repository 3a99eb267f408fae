"""Secret detection and redaction (kernel/secrets.py) and every read path that shows evidence.

Fake credentials are assembled from pieces so that no secret scanner mistakes this file for a
leak; each has the documented shape of its issuer's format.
"""

import logging
import re
from urllib.parse import quote

import pytest

from conftest import auth
from durable_ledger.kernel.secrets import REDACTED, find_secrets, is_secret_key, redact, value_rule

A, H = "a1B2c3D4e5F6g7H8", "0123456789abcdef"
KNOWN_FORMATS = [
    ("openai project key", "sk-proj-" + A * 3),
    ("anthropic key", "sk-" + "ant-api03-" + A * 2),
    ("Authorization: Bearer header", "Authorization: Bearer " + "abc.def-ghi_jkl"),
    ("HTTP basic credentials", "Authorization: Basic " + "dXNlcjpwYXNzd29yZA=="),
    ("RSA private key block", "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEow" + A * 4),
    ("OpenSSH private key block", "-----BEGIN OPENSSH " + "PRIVATE KEY-----\\nb3BlbnNzaC1rZXktdjEAAAAA" + A),
    ("PGP private key block", "-----BEGIN PGP " + "PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\nlQOYBF" + A * 2),
    ("encrypted PKCS#8 key block", "-----BEGIN ENCRYPTED " + "PRIVATE KEY-----\r\nMIIFHDBOBgkq" + A * 4),
    ("durable ledger token", "dl_" + A * 2),
    ("GitHub classic PAT", "ghp_" + A * 2 + "abcd"),
    ("GitHub OAuth token", "gho_" + A * 2 + "abcd"),
    ("GitHub fine-grained PAT", "github_pat_" + "11ABCDEFG0" + "_" + A * 3),
    ("GitLab PAT", "glpat-" + A + "xyz1"),
    ("Slack bot token", "xoxb-" + "1234567890-" + A),
    ("Slack user token", "xoxp-" + "1234567890-" + A),
    ("Slack webhook URL", "https://hooks.slack.com/services/" + "T00000000/B00000000/" + A),
    ("AWS access key id", "AKIA" + "IOSFODNN7EXAMPLE"),
    ("AWS temporary key id", "ASIA" + "IOSFODNN7EXAMPLE"),
    ("Stripe live secret key", "sk_" + "live_" + A * 2),
    ("Stripe restricted key", "rk_" + "live_" + A * 2),
    ("Stripe test key", "sk_" + "test_" + A * 2),
    ("Stripe webhook secret", "whsec_" + A * 2),
    ("Google API key", "AIza" + "SyA" + A * 2),
    ("Google OAuth access token", "ya29." + A * 2),
    ("Google OAuth client secret", "GOCSPX-" + A * 2),
    ("JWT", "eyJhbGciOiJIUzI1NiJ9" + "." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0" + "." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"),
    ("npm token", "npm_" + A * 2 + "abcd"),
    ("PyPI token", "pypi-" + "AgEIcHlwaS5vcmc" + A * 4),
    ("SendGrid key", "SG." + A + "abcdef" + "." + A * 2 + "abcdefghijk"),
    ("Twilio API key", "SK" + H * 2),
    ("Mailgun key", "key-" + A * 2),
    ("Mailchimp key", H * 2 + "-us6"),
    ("Shopify access token", "shpat_" + H * 2),
    ("DigitalOcean token", "dop_v1_" + H * 4),
    ("Hugging Face token", "hf_" + A * 2 + "ab"),
    ("Discord webhook URL", "https://discord.com/api/webhooks/" + "123456789012345678/" + A * 2),
    ("Telegram bot token", "123456789:" + "AA" + A * 2 + "x"),
    ("Square access token", "sq0atp-" + A * 2),
    ("Atlassian API token", "ATATT3" + A * 4),
    ("Azure storage account key", "DefaultEndpointsProtocol=https;AccountName=x;AccountKey=" + A * 5 + "=="),
    ("Postman API key", "PMAK-" + H + "01234567" + "-" + H * 2 + "ab"),
    ("Linear API key", "lin_api_" + A * 2 + "abcdefgh"),
    ("Notion integration token", "ntn_" + A * 3),
    ("HashiCorp Vault token", "hvs." + A * 2),
    ("age secret key", "AGE-SECRET-KEY-1" + "QWERTYUIOPASDFGHJKLZXCVBNM0123456789QWERTYUIOPASDFGHJKLZXC"),
    ("WordPress application password", "abcd EFGH ijkl MNOP qrst UV12"),
    ("credentials in a URL", "postgresql://" + "ledger:hunter2" + "@db.internal/ledger"),
]


@pytest.mark.parametrize("name,secret", KNOWN_FORMATS, ids=[n for n, _ in KNOWN_FORMATS])
def test_secrets_known_formats_are_caught_in_values_keys_and_text(name, secret):
    assert value_rule(secret), name
    assert value_rule(f"upstream said: {secret} (rejected)"), name
    assert list(find_secrets({"remote": {"note": secret}})), name
    assert list(find_secrets({"remote": {secret: 1}})), f"{name} as a dict key"
    shown = redact({"error": f"HTTP 401 with {secret} in it", secret: "v"})
    assert secret not in str(shown) and REDACTED in str(shown), name


def test_secrets_table_covers_at_least_thirty_formats():
    assert len(KNOWN_FORMATS) >= 30


@pytest.mark.parametrize("key", ["password", "pwd", "passwd", "accessToken", "refreshToken", "authToken", "apiToken",
                                 "secretKey", "bearer", "jwt", "private_key", "client_secret", "clientSecret",
                                 "PrivateKey", "APIKey", "X-Api-Key", "ACCESS_TOKEN", "access-token", "api_key",
                                 "Authorization", "appPassword", "session.key", "id_token", "Cookie"])
def test_secrets_key_names_are_normalised(key):
    assert is_secret_key(key)
    assert list(find_secrets({"remote": {key: "x"}}))
    assert redact({key: "x"}) == {key: REDACTED}


@pytest.mark.parametrize("key", ["fencing_token", "total_tokens", "max_tokens", "title", "tokenizer", "passage",
                                 "bypass_cache", "compass", "keyword", "author"])
def test_secrets_harmless_key_names_pass(key):
    assert not is_secret_key(key)


def test_secrets_harmless_values_pass():
    assert list(find_secrets({"fencing_token": 3, "usage": {"total_tokens": 10}, "title": "Passwords 101",
                              "body": "A basic understanding of bearer bonds", "sha": "a" * 64})) == []


# -- the HTTP surface -------------------------------------------------------------------------

@pytest.fixture
def leased(client):
    client.put("/v1/jobs/j1", json={"pipeline": "article"}, headers=auth())
    return client.post("/v1/jobs/j1/lease", json={"owner": "o"}, headers=auth()).get_json()["fencing_token"]


STRIPE = "sk_" + "live_" + A * 2
BEARER = "Bearer " + "eyJhbGciOi" + A


def test_secrets_phase_and_dict_keys_in_checkpoints_are_refused(client, leased):
    for body in ({"phase": STRIPE}, {"phase": "SOURCES_COLLECTED", "remote": {STRIPE: 1}},
                 {"phase": "SOURCES_COLLECTED", "remote": {"accessToken": "x"}},
                 {"phase": "SOURCES_COLLECTED", "next_allowed_actions": ["glpat-" + A * 2]}):
        r = client.post("/v1/jobs/j1/checkpoints", json={"fencing_token": leased, **body}, headers=auth())
        assert (r.status_code, r.get_json()["error"]["code"]) == (422, "secret_in_checkpoint"), body


def _sent_with_secrets(client, leased):
    r = client.post("/v1/operations/begin", json={"job_id": "j1", "action": "create_draft", "fencing_token": leased,
                                                  "payload": {"title": "T", "api_key": "plain-value-1"}},
                    headers=auth())
    key = r.get_json()["operation"]["operation_key"]
    url = f"/v1/operations/{quote(key, safe='')}"
    r = client.post(url + "/unknown", headers=auth(), json={
        "fencing_token": leased, "error": {"message": f"401 Authorization: {BEARER}", "echo": STRIPE,
                                           "headers": {"apiToken": "plain-value-2"}}})
    assert r.status_code == 200
    return key, url


def _assert_clean(text, shows_evidence=True):
    for leaked in (STRIPE, BEARER, "plain-value-1", "plain-value-2", "eyJhbGciOi" + A):
        assert leaked not in text
    assert REDACTED in text or not shows_evidence


def test_secrets_are_redacted_on_every_read_path(app, client, leased):
    key, url = _sent_with_secrets(client, leased)
    _assert_clean(client.get(url, headers=auth()).get_data(as_text=True))
    _assert_clean(client.get("/v1/reviews", headers=auth("editor-token")).get_data(as_text=True))
    _assert_clean(client.get(f"/v1/reviews/{quote(key, safe='')}", headers=auth("editor-token")).get_data(as_text=True))
    _assert_clean(client.get("/v1/jobs/j1/report", headers=auth()).get_data(as_text=True))
    _assert_clean(client.get("/v1/jobs/j1/operations", headers=auth()).get_data(as_text=True))
    # the review page, signed in as an editor
    page = app.test_client()
    csrf = re.search(r'name="csrf" value="([^"]+)"',
                     page.get("/review", follow_redirects=True).get_data(as_text=True)).group(1)
    page.post("/review/login", data={"token": "editor-token", "csrf": csrf})
    _assert_clean(page.get("/review", follow_redirects=True).get_data(as_text=True), shows_evidence=False)
    _assert_clean(page.get(f"/review/item/{quote(key, safe='')}", follow_redirects=True).get_data(as_text=True))


def test_secrets_receipts_are_redacted_when_shown(client, leased):
    r = client.post("/v1/operations/begin", json={"job_id": "j1", "action": "a", "fencing_token": leased,
                                                  "payload": {}}, headers=auth())
    url = f"/v1/operations/{quote(r.get_json()['operation']['operation_key'], safe='')}"
    client.post(url + "/confirm", json={"fencing_token": leased, "remote_id": 1,
                                        "receipt": {"api_key": "plain-value-1", "link": "https://x/1",
                                                    "raw": f"token {STRIPE}"}}, headers=auth())
    op = client.get(url, headers=auth()).get_json()["operation"]
    assert op["receipt"] == {"api_key": REDACTED, "link": "https://x/1", "raw": f"token {REDACTED}"}


def test_secrets_sql_parameters_never_reach_a_debug_log(database, caplog):
    from conftest import TOKENS
    from durable_ledger.app import create_app
    from durable_ledger.kernel.config import Config

    app = create_app(Config(database_url=database, bootstrap_tokens=TOKENS, log_level="DEBUG"))
    client = app.test_client()
    with caplog.at_level(logging.DEBUG):
        client.put("/v1/jobs/j1", json={}, headers=auth())
        token = client.post("/v1/jobs/j1/lease", json={"owner": "o"}, headers=auth()).get_json()["fencing_token"]
        r = client.post("/v1/operations/begin", json={"job_id": "j1", "action": "a", "fencing_token": token,
                                                      "payload": {"title": "secret-title-xyz"}}, headers=auth())
        key = r.get_json()["operation"]["operation_key"]
        client.post(f"/v1/operations/{quote(key, safe='')}/confirm", headers=auth(),
                    json={"fencing_token": token, "remote_id": 1, "receipt": {"note": "receipt-body-xyz"}})
        logging.getLogger("durable_ledger").debug("upstream answered %s", f"Authorization: {BEARER}")
    text = "\n".join(r.getMessage() for r in caplog.records) + caplog.text
    assert "receipt-body-xyz" not in text and "secret-title-xyz" not in text
    assert not [r for r in caplog.records if r.name == "peewee" and r.levelno < logging.INFO]
    assert BEARER not in caplog.text


def test_value_rule_names_the_leftmost_credential_not_the_first_rule():
    # A SendGrid key's random parts can start with or hold "sk-": found in CI's generated keys,
    # it read as an OpenAI key. The format is the one of the credential that starts first.
    assert value_rule("said: 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") == "sendgrid_key"
    assert value_rule("SG.abcdefghijklmnopqrstuv.x-sk-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA") == "sendgrid_key"
    assert value_rule("sk-AAAAAAAAAAAAAAAAAAAAAAAA then SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuv") == \
        "openai_or_anthropic_key"
