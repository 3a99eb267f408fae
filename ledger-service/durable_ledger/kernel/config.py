"""Configuration from the environment (12-factor). Every knob has a safe default for one box."""

import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit


def default_data_dir():
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.environ.get("DURABLE_DATA_DIR") or os.path.join(base, "durable-steps")


@dataclass
class Config:
    database_url: str = ""
    bootstrap_tokens: str = ""
    log_level: str = "INFO"
    token_cache_ttl_s: float = 30.0
    default_lease_ttl_s: int = 120
    default_max_attempts: int = 3
    backoff_base_s: float = 1.0
    proxy_url: str = ""
    proxy_token: str = ""
    proxy_default_site: str = "default"
    reconcile_http: str = ""
    reconcile_claim_s: float = 60.0
    secret_key: str = ""
    approval_ttl_s: float = 24 * 3600  # default expiry of an approval given in the console
    console_session_ttl_s: float = 12 * 3600  # a console sign-in ends this long after it began
    n8n_url: str = ""  # base URL of the n8n editor, for links to executions on the job timeline
    public_url: str = ""  # the console's public base URL for approval links; empty: the request's host
    # Size limits (bytes). A JSON body is refused whole above max_body_bytes (413); receipts and
    # error objects, and a checkpoint's body, are measured as canonical JSON (422).
    max_body_bytes: int = 2 * 1024 * 1024
    max_receipt_bytes: int = 64 * 1024
    max_checkpoint_bytes: int = 256 * 1024
    max_artifact_bytes: int = 32 * 1024 * 1024
    artifact_quota_bytes: int = 1024 * 1024 * 1024  # per tenant, sum of its distinct artifacts
    # Resuming waiting n8n executions (approvals/waits.py): where resume URLs may point, how
    # often and how long the deliverer retries (the host of n8n_url is allowed by default).
    resume_hosts: str = ""
    resume_max_attempts: int = 20
    resume_backoff_s: float = 1.0
    resume_backoff_max_s: float = 60.0
    resume_timeout_s: float = 10.0
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_env(cls, env=None):
        env = os.environ if env is None else env
        url = env.get("DURABLE_DATABASE_URL")
        if not url:
            data_dir = Path(env.get("DURABLE_DATA_DIR") or default_data_dir())
            data_dir.mkdir(parents=True, exist_ok=True)
            url = f"sqlite:///{data_dir / 'durable-ledger.db'}"
        return cls(
            database_url=url,
            bootstrap_tokens=env.get("DURABLE_BOOTSTRAP_TOKENS", ""),
            log_level=env.get("DURABLE_LOG_LEVEL", "INFO").upper(),
            token_cache_ttl_s=float(env.get("DURABLE_TOKEN_CACHE_TTL_S", "30")),
            default_lease_ttl_s=int(env.get("DURABLE_LEASE_TTL_S", "120")),
            default_max_attempts=int(env.get("DURABLE_MAX_ATTEMPTS", "3")),
            backoff_base_s=float(env.get("DURABLE_BACKOFF_BASE_S", "1.0")),
            proxy_url=env.get("DURABLE_PROXY_URL", ""),
            proxy_token=env.get("DURABLE_PROXY_TOKEN", ""),
            proxy_default_site=env.get("DURABLE_PROXY_SITE", "default"),
            reconcile_http=env.get("DURABLE_RECONCILE_HTTP", ""),
            reconcile_claim_s=float(env.get("DURABLE_RECONCILE_CLAIM_S", "60")),
            secret_key=env.get("DURABLE_SECRET_KEY", ""),
            public_url=env.get("DURABLE_PUBLIC_URL", "").rstrip("/"),
            approval_ttl_s=float(env.get("DURABLE_APPROVAL_TTL_S", 24 * 3600)),
            console_session_ttl_s=float(env.get("DURABLE_CONSOLE_SESSION_TTL_S", cls.console_session_ttl_s)),
            n8n_url=env.get("DURABLE_N8N_URL", "").rstrip("/"),
            max_body_bytes=int(env.get("DURABLE_MAX_BODY_BYTES", cls.max_body_bytes)),
            max_receipt_bytes=int(env.get("DURABLE_MAX_RECEIPT_BYTES", cls.max_receipt_bytes)),
            max_checkpoint_bytes=int(env.get("DURABLE_MAX_CHECKPOINT_BYTES", cls.max_checkpoint_bytes)),
            max_artifact_bytes=int(env.get("DURABLE_MAX_ARTIFACT_BYTES", cls.max_artifact_bytes)),
            artifact_quota_bytes=int(env.get("DURABLE_ARTIFACT_QUOTA_BYTES", cls.artifact_quota_bytes)),
            resume_hosts=env.get("DURABLE_N8N_RESUME_HOSTS", ""),
            resume_max_attempts=int(env.get("DURABLE_RESUME_MAX_ATTEMPTS", cls.resume_max_attempts)),
            resume_backoff_s=float(env.get("DURABLE_RESUME_BACKOFF_S", cls.resume_backoff_s)),
            resume_backoff_max_s=float(env.get("DURABLE_RESUME_BACKOFF_MAX_S", cls.resume_backoff_max_s)),
            resume_timeout_s=float(env.get("DURABLE_RESUME_TIMEOUT_S", cls.resume_timeout_s)),
        )

    def redacted(self):
        """What may be logged: never tokens, never database passwords."""
        parts = urlsplit(self.database_url)
        netloc = parts.netloc
        if not netloc:
            return {"database_url": self.database_url, "log_level": self.log_level,
                    "bootstrap_tokens": len([t for t in self.bootstrap_tokens.split(",") if t.strip()]),
                    "proxy_url": self.proxy_url or None}
        if "@" in netloc:
            creds, host = netloc.rsplit("@", 1)
            user = creds.split(":", 1)[0]
            netloc = f"{user}:***@{host}" if ":" in creds else f"{user}@{host}"
        return {
            "database_url": urlunsplit(parts._replace(netloc=netloc)),
            "bootstrap_tokens": len([t for t in self.bootstrap_tokens.split(",") if t.strip()]),
            "log_level": self.log_level,
            "proxy_url": self.proxy_url or None,
        }
