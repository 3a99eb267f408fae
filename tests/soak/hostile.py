"""Hostile runners for the soak: forged writes sent straight to the publishing proxy during a run.

Two attackers, both holding real runner tokens with rights on the site:

- `intruder`: a runner of *another tenant*. It cannot read the victim's ledger, but operation
  keys, job ids and post ids are guessable (`{tenant}:{job_id}:v1:create_draft`, sequential post
  ids), so it
  * replays the victim's keys and job id with a huge fencing token (forwarded, that token would
    raise the victim's fence in WordPress and lock its real runs out) — `intruder_<action>`;
  * uses a grant of its own: an operation its own tenant really dispatched (SENT, same site),
    sent with the victim's job id and a huge token, or onto the victim's post's publish route —
    `intruder_own_grant_*`.
- `fenced_out`: a runner of the *same tenant* that held the job's lease before the real run
  took it over (`fence_out()` takes a real lease before the job's first run; the run's Start Job
  takes over). It reads the job's operations and sends writes for them with its stale token, with
  the current token but another body, without any token, and for operations already CONFIRMED
  (suffix `_settled`). The exact dispatched body with the current token is never sent: that is
  the legitimate write, indistinguishable from the real runner's retry.

Every forged write must be answered 4xx with an error code by the proxy, before WordPress sees
it: counted as `refused` (per attack, per code). A 2xx/3xx/5xx or a 4xx without a code is
`accepted` (a sample is kept). A request that got no answer at all (the proxy busy or gone) is a
`transport_error`, reported separately; failed look-ups the attackers make to pick a target are
`recon_errors` and send nothing. The soak then counts WordPress itself: every object must still
be the receipt of one CONFIRMED operation and no job's fence in WordPress may be above the
ledger's, so a forged write that slipped through shows up twice, here and there.
"""
from __future__ import annotations

import base64
import hashlib
import random
import threading
from collections import Counter, defaultdict
from urllib.parse import quote

import requests

# Actions of the article pipeline that write to WordPress, as the ledger names them.
WRITE_ACTIONS = ("create_draft", "upload_media:hero", "upload_media:inline-1", "upload_media:inline-2",
                 "set_seo", "add_resource_pack", "publish")
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nforged").decode()
HUGE_TOKENS = (10**6, 2**31 - 1, 10**12)


class HostileRunners:
    def __init__(self, proxy_url: str, ledger_url: str, site: str, tenant: str, victim_token: str,
                 intruder_tenant: str, intruder_token: str, seed: int = 0, interval_s: float = 0.05):
        self.proxy, self.ledger, self.site, self.tenant = proxy_url.rstrip("/"), ledger_url.rstrip("/"), site, tenant
        self.intruder_tenant = intruder_tenant
        self.victim_h = {"Authorization": f"Bearer {victim_token}"}
        self.intruder_h = {"Authorization": f"Bearer {intruder_token}"}
        self.seed = seed
        self.interval_s = interval_s
        self.counts: Counter = Counter()
        self.by_attack: dict[str, Counter] = defaultdict(Counter)
        self.per_job: Counter = Counter()
        self.accepted: list[dict] = []
        self.stale_token: dict[str, int] = {}  # job -> the token the fenced-out runner held
        self.own_grant: dict | None = None
        self._posts: dict[str, int] = {}
        self._job: str | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._local = threading.local()  # one HTTP session and one random stream per attacker thread

    # ------------------------------------------------------------------ lifecycle

    def target(self, job_id: str | None) -> None:
        """The job whose run is under way (None: pause between jobs)."""
        self._job = job_id

    def start(self) -> HostileRunners:
        """Two attacker threads, each sending one forged write every ``interval_s`` (plus its
        round trip) while a job is targeted."""
        attackers = {"intruder": (self.intruder_attack, self.intruder_own_grant_attack),
                     "fenced-out": (self.fenced_out_attack,)}
        for i, (name, attacks) in enumerate(attackers.items()):
            t = threading.Thread(target=self._loop, args=(attacks, self.seed * 10 + i), name=f"hostile-{name}",
                                 daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> dict:
        """Stop the attackers; the intruder's own dispatched operation is reported failed (it was
        never written), so the end-of-soak sweep has nothing of another tenant to reconcile."""
        if not self._stop.is_set():
            self._stop.set()
            for t in self._threads:
                t.join(30)
            if self.own_grant is not None:
                g = self.own_grant
                try:
                    requests.post(f"{self.ledger}/v1/operations/{quote(g['operation_key'], safe='')}/fail",
                                  json={"fencing_token": g["fencing_token"], "retryable": False, "error": {"code": "never_sent",
                                        "message": "the intruder's probe: never written"}},
                                  headers=self.intruder_h, timeout=30)
                except requests.RequestException:
                    pass
        return self.report()

    @property
    def rng(self) -> random.Random:
        return self._local.rng

    @property
    def _session(self) -> requests.Session:
        if not hasattr(self._local, "session"):
            self._local.session = requests.Session()
        return self._local.session

    def report(self) -> dict:
        c = self.counts
        return {"forged_writes": c["sent"], "refused": c["refused"], "accepted": len(self.accepted),
                "transport_errors": c["transport_error"], "recon_errors": c["recon_error"],
                "jobs_targeted": len(self.per_job), "fenced_out_leases": len(self.stale_token),
                "intruder_own_grant": self.own_grant["operation_key"] if self.own_grant else None,
                "by_attack": {a: dict(sorted(v.items())) for a, v in sorted(self.by_attack.items())},
                "refusal_codes": {k[5:]: v for k, v in sorted(c.items()) if k.startswith("code:")},
                "accepted_samples": self.accepted[:5]}

    def _loop(self, attacks, seed: int) -> None:
        self._local.rng = random.Random(seed)
        while not self._stop.wait(self.interval_s):
            job = self._job
            if job is None:
                continue
            attack = self.rng.choice(attacks)
            try:
                attack(job)
            except requests.RequestException:
                self.counts["recon_error"] += 1  # a look-up failed (ledger restarting): nothing was sent

    # ------------------------------------------------------------------ set-up

    def fence_out(self, job: str) -> int | None:
        """Before the job's first run: take its lease as another worker of the same tenant. The
        run's Start Job (takeover) fences this runner out; its token is then really stale."""
        try:
            r = self._session.put(f"{self.ledger}/v1/jobs/{quote(job, safe='')}", json={"pipeline": "article"},
                                  headers=self.victim_h, timeout=30)
            r.raise_for_status()
            r = self._session.post(f"{self.ledger}/v1/jobs/{quote(job, safe='')}/lease",
                                   json={"owner": "fenced-out-runner", "ttl_s": 900, "takeover": True},
                                   headers=self.victim_h, timeout=30)
            r.raise_for_status()
        except requests.RequestException:
            self.counts["recon_error"] += 1
            return None
        self.stale_token[job] = r.json()["fencing_token"]
        return self.stale_token[job]

    def _ensure_own_grant(self) -> dict | None:
        """An operation the intruder's own tenant really dispatched: a job, a lease, a begin (SENT)
        for a draft on the same site. Its write is never sent as dispatched."""
        if self.own_grant is not None:
            return self.own_grant
        job = f"intruder-probe-{self.seed}"
        payload = {"title": f"intruder probe {self.seed}", "content": "<p>intruder</p>"}
        h, base = self.intruder_h, f"{self.ledger}/v1/jobs/{quote(job, safe='')}"
        self._session.put(base, json={"pipeline": "generic"}, headers=h, timeout=30).raise_for_status()
        r = self._session.post(base + "/lease", json={"owner": "intruder", "ttl_s": 86400, "takeover": True},
                               headers=h, timeout=30)
        r.raise_for_status()
        token = r.json()["fencing_token"]
        r = self._session.post(f"{self.ledger}/v1/operations/begin", headers=h, timeout=30,
                               json={"job_id": job, "action": "create_draft", "payload": payload,
                                     "fencing_token": token, "target": f"wordpress:{self.site}"})
        r.raise_for_status()
        out = r.json()
        if out.get("decision") != "dispatch":
            raise requests.RequestException(f"intruder's own begin was not dispatched: {out}")
        with self._lock:
            self.own_grant = {"operation_key": out["operation"]["operation_key"], "job_id": job,
                              "fencing_token": token, "payload": payload}
        return self.own_grant

    # ------------------------------------------------------------------ sending

    def _url(self, path: str) -> str:
        return f"{self.proxy}/v1/sites/{quote(self.site, safe='')}{path}"

    def _send(self, attack: str, job: str, path: str, body: dict, headers: dict) -> None:
        with self._lock:
            self.counts["sent"] += 1
            self.by_attack[attack]["sent"] += 1
            self.per_job[job] += 1
        try:
            r = self._session.post(self._url(path), json=body, headers=headers, timeout=60)
        except requests.RequestException as exc:
            with self._lock:
                self.counts["transport_error"] += 1
                self.by_attack[attack]["transport_error"] += 1
            self.last_transport_error = repr(exc)[:200]
            return
        code = None
        if r.headers.get("content-type", "").startswith("application/json"):
            try:
                err = r.json().get("error")
                code = err.get("code") if isinstance(err, dict) else None
            except ValueError:
                code = None
        with self._lock:
            if 400 <= r.status_code < 500 and code:
                self.counts["refused"] += 1
                self.counts["code:" + code] += 1
                self.by_attack[attack]["refused"] += 1
                self.by_attack[attack]["code:" + code] += 1
            else:
                self.by_attack[attack]["accepted"] += 1
                self.accepted.append({"attack": attack, "job_id": job, "path": path, "status": r.status_code,
                                      "body": r.text[:300]})

    def _write(self, attack: str, job: str, action: str, ident: dict, headers: dict) -> None:
        """One forged write for ``action`` (schema-valid, so the refusal is the gate's, not the
        body validator's)."""
        base = action.split(":", 1)[0]
        if base == "create_draft":
            self._send(attack, job, "/drafts", {**ident, "title": f"forged {job}", "content": "<p>forged</p>"}, headers)
        elif base == "upload_media":
            self._send(attack, job, "/media", {**ident, "content_base64": PNG, "filename": "forged.png",
                                               "mime_type": "image/png"}, headers)
        else:
            post_id = self._victim_post(job)
            if post_id is None:
                return
            if base == "publish":
                self._send(attack, job, f"/posts/{post_id}/publish",
                           {**ident, "content_sha256": hashlib.sha256(b"forged").hexdigest()}, headers)
            elif base == "add_resource_pack":
                self._send(attack, job, f"/posts/{post_id}",
                           {**ident, "content": "<p>forged</p>", "resource_pack": {"html": "<p>forged pack</p>"}},
                           headers)
            else:
                self._send(attack, job, f"/posts/{post_id}/seo", {**ident, "seo": {"title": "forged"}}, headers)

    # ------------------------------------------------------------------ attacks

    def intruder_attack(self, job: str) -> None:
        """Another tenant replays the victim's identity: its key, its job id, a huge token."""
        action = self.rng.choice(WRITE_ACTIONS)
        ident = {"operation_key": f"{self.tenant}:{job}:v1:{action}", "job_id": job,
                 "fencing_token": self.rng.choice(HUGE_TOKENS)}
        if self.rng.random() < 0.25:
            ident.pop("operation_key")
            ident["operation_key"] = f"{job}:v1:{action}"  # a custom-looking key: qualified to the intruder
        self._write(f"intruder_{action.split(':', 1)[0]}", job, action, ident, self.intruder_h)

    def intruder_own_grant_attack(self, job: str) -> None:
        """Another tenant's real SENT operation, carried onto the victim's job or post."""
        grant = self._ensure_own_grant()
        variant = self.rng.choice(("victim_job", "huge_token", "publish_victim_post"))
        ident = {"operation_key": grant["operation_key"]}
        if variant == "victim_job":
            ident.update(job_id=job, fencing_token=self.rng.choice((grant["fencing_token"], *HUGE_TOKENS)))
            self._send("intruder_own_grant_victim_job", job, "/drafts", {**ident, **grant["payload"]}, self.intruder_h)
        elif variant == "huge_token":
            ident.update(fencing_token=self.rng.choice(HUGE_TOKENS))
            self._send("intruder_own_grant_huge_token", job, "/drafts", {**ident, **grant["payload"]}, self.intruder_h)
        else:
            ident.update(job_id=job, fencing_token=grant["fencing_token"])
            self._write("intruder_own_grant_publish", job, "publish", ident, self.intruder_h)

    def fenced_out_attack(self, job: str) -> None:
        """The same tenant's worker that lost the lease: stale token, other body, no token, settled keys."""
        r = self._session.get(f"{self.ledger}/v1/jobs/{quote(job, safe='')}/operations", headers=self.victim_h,
                              timeout=30)
        if r.status_code != 200:
            self.counts["recon_error"] += 1
            return
        ops = [o for o in r.json()["operations"] if o["action"] in WRITE_ACTIONS]
        if not ops:
            return
        op = self.rng.choice(ops)
        stale = self.stale_token.get(job)
        kinds = ["other_body", "no_token"] + (["stale_token", "stale_token"] if stale is not None
                                               and stale < op["fencing_token"] else [])
        kind = self.rng.choice(kinds)
        ident = {"operation_key": op["operation_key"], "job_id": job}
        if kind == "stale_token":
            ident["fencing_token"] = stale
        elif kind == "other_body":
            ident["fencing_token"] = op["fencing_token"]
        else:
            ident.pop("job_id")
        label = f"fenced_out_{kind}" + ("_settled" if op["state"] == "CONFIRMED" else "")
        self._write(label, job, op["action"], ident, self.victim_h)

    def _victim_post(self, job: str) -> int | None:
        if job in self._posts:
            return self._posts[job]
        r = self._session.get(f"{self.proxy}/v1/sites/{quote(self.site, safe='')}/jobs/{quote(job, safe='')}",
                              headers=self.victim_h, timeout=30)
        if r.status_code != 200:
            self.counts["recon_error"] += 1
            return None
        posts = [o["id"] for o in r.json().get("objects", []) if o.get("object_type") == "post"]
        if posts:
            self._posts[job] = posts[0]
        return posts[0] if posts else None
