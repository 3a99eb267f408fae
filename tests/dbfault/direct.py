"""A client that calls the ledger's HTTP API directly (begin, confirm, batch, lookup-result) the way
the node does, and writes every answer down.

The protocol of one step, as the Gated HTTP Request runs it:

    start the job (retried until answered) -> begin
      dispatch       write to the remote with Idempotency-Key = the operation key, then confirm
                     (a confirm that got no answer is sent again: confirming twice is a no-op)
      reuse_receipt  done before
      reconcile      look the key up at the remote and report it (lookup-result): found ->
                     the receipt is stored; absent -> the ledger dispatches a new attempt
    any ledger error (5xx): nothing is sent; the same call is made again a moment later

`Book` keeps every answer (to count the ones without the error shape, and the slowest) and every
state an answer claimed (to check it against the database once it is back).
"""
from __future__ import annotations

import threading
import time

import requests

ACTION = "create_order"
RETRY_S = 0.25


class Book:
    def __init__(self):
        self.answers: list[dict] = []
        self.claims: list[tuple[str, str, int]] = []  # (operation key, state, attempt) an answer claimed
        self._lock = threading.Lock()

    def answer(self, fault: str, route: str, status: int | None, body, seconds: float):
        row = {"fault": fault, "route": route, "status": status, "seconds": round(seconds, 2),
               "code": error_code(body), "shaped": status is not None and (status < 400 or shaped(body))}
        with self._lock:
            self.answers.append(row)
        return row

    def claim(self, operation: dict):
        with self._lock:
            self.claims.append((operation["operation_key"], operation["state"], int(operation.get("attempt") or 0)))

    def of(self, fault: str) -> list[dict]:
        with self._lock:
            return [a for a in self.answers if a["fault"] == fault]


def shaped(body) -> bool:
    """The ledger's error answer: {"error": {"code", "message", "details"}} and nothing else."""
    return (isinstance(body, dict) and set(body) == {"error"} and isinstance(body["error"], dict)
            and set(body["error"]) == {"code", "message", "details"} and isinstance(body["error"]["code"], str))


def error_code(body) -> str | None:
    return body["error"].get("code") if isinstance(body, dict) and isinstance(body.get("error"), dict) else None


class Direct:
    def __init__(self, url: str, token: str, remote, book: Book, fault: str, deadline_s: float = 150):
        self.url, self.remote, self.book, self.fault = url, remote, book, fault
        self.headers = {"Authorization": f"Bearer {token}"}
        self.deadline = time.monotonic() + deadline_s
        self.results: dict[str, str] = {}

    # ------------------------------------------------------------------ one call

    def call(self, route: str, body: dict, method: str = "POST") -> tuple[int | None, object]:
        t0 = time.monotonic()
        try:
            r = requests.request(method, self.url + route, json=body, headers=self.headers, timeout=45)
            status = r.status_code
            try:
                doc = r.json()
            except ValueError:
                doc = r.text[:300]
        except requests.RequestException as exc:  # no answer at all: a hang or a dropped connection
            status, doc = None, f"{type(exc).__name__}: {exc}"[:300]
        self.book.answer(self.fault, route.rsplit("/", 1)[-1] if "/operations/" in route else route, status, doc,
                         time.monotonic() - t0)
        return status, doc

    def until_answered(self, route: str, body: dict, ok=(200, 201)) -> dict:
        """The call, again after each ledger error, until it is answered (or the deadline)."""
        while True:
            status, doc = self.call(route, body)
            if status in ok:
                return doc
            if status is not None and status < 500 and status not in (409,):
                raise AssertionError(f"{route}: refused {status} {doc}")
            if time.monotonic() > self.deadline:
                raise TimeoutError(f"{route}: no answer before the deadline; last {status} {doc}")
            time.sleep(RETRY_S)

    # ------------------------------------------------------------------ a step

    def start(self, job: str) -> int:
        return self.until_answered(f"/v1/jobs/{job}/start", {"owner": f"direct-{job}"})["fencing_token"]

    def begin_body(self, job: str, order_id: str, token: int) -> dict:
        return {"job_id": job, "action": ACTION, "payload": {"order_id": order_id}, "fencing_token": token}

    def step(self, job: str, order_id: str, token: int | None = None) -> str:
        token = token if token is not None else self.start(job)
        answer = self.until_answered("/v1/operations/begin", self.begin_body(job, order_id, token))
        return self.follow(job, order_id, token, answer)

    def follow(self, job: str, order_id: str, token: int, answer: dict) -> str:
        for _ in range(6):
            decision, op = answer["decision"], answer["operation"]
            key = op["operation_key"]
            if decision == "dispatch":
                self.book.claim(op)
                written = self.write(key, order_id)
                self.confirm(key, token, written["id"])
                return self._done(job, "done")
            if decision == "reuse_receipt":
                self.book.claim(op)
                return self._done(job, "done_before")
            if decision != "reconcile":
                return self._done(job, decision)
            found = self.remote.by_key(key)
            report = {"fencing_token": token, "attempt": op["attempt"], "result": "found" if found else "absent",
                      "evidence": {"looked_up": key}}
            if found:
                report.update(remote_id=found["id"], receipt={"id": found["id"], "order_id": order_id})
            answer = self.until_answered(f"/v1/operations/{key}/lookup-result", report)
        return self._done(job, "loop")

    def write(self, key: str, order_id: str) -> dict:
        r = requests.post(self.remote.url + "/orders", json={"order_id": order_id},
                          headers={"Idempotency-Key": key}, timeout=30)
        assert r.status_code == 201, r.text
        return r.json()

    def confirm(self, key: str, token: int, remote_id: str):
        doc = self.until_answered(f"/v1/operations/{key}/confirm",
                                  {"fencing_token": token, "remote_id": remote_id, "receipt": {"id": remote_id}})
        self.book.claim(doc["operation"])

    def prepared(self, job: str, order_id: str) -> tuple[str, int, str]:
        """begin + the remote write, not confirmed yet: (key, token, remote id) for a confirm later."""
        token = self.start(job)
        answer = self.until_answered("/v1/operations/begin", self.begin_body(job, order_id, token))
        assert answer["decision"] == "dispatch", answer
        self.book.claim(answer["operation"])
        key = answer["operation"]["operation_key"]
        return key, token, self.write(key, order_id)["id"]

    def batch(self, confirm: tuple[str, int, str, str], begins: list[tuple[str, str, int]]) -> dict[str, str]:
        """One batch: the confirm of a prepared step and the begins of other jobs. A batch that is
        not answered is finished item by item on the single routes (as the node does)."""
        key, token, remote_id, confirm_job = confirm
        body = {"confirm": [{"operation_key": key, "fencing_token": token, "remote_id": remote_id,
                             "receipt": {"id": remote_id}}],
                "begin": [self.begin_body(job, order, tok) for job, order, tok in begins]}
        status, doc = self.call("/v1/operations/batch", body)
        if status == 200:
            slot = doc["confirm"][0]
            if "operation" in slot:
                self.book.claim(slot["operation"])
                self.results[confirm_job] = "done"
            else:
                self.confirm(key, token, remote_id)
                self.results[confirm_job] = "done"
            for (job, order, tok), slot in zip(begins, doc["begin"]):
                if "decision" in slot:
                    self.follow(job, order, tok, slot)
                else:
                    self.step(job, order, tok)
            return self.results
        self.confirm(key, token, remote_id)
        self.results[confirm_job] = "done"
        for job, order, tok in begins:
            self.step(job, order, tok)
        return self.results

    def _done(self, job: str, how: str) -> str:
        self.results[job] = how
        return how


def in_thread(fn, *args) -> threading.Thread:
    """Run a client call in the background; its exception (if any) is kept on the thread."""
    def run():
        try:
            th.result = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            th.error = exc

    th = threading.Thread(target=run, daemon=True)
    th.result, th.error = None, None
    th.start()
    return th
