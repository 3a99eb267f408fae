"""What was asked about an operation, of whom, and what it answered, in words (issue 35).

The review item (console and API) and the job's timeline say this and nothing more: "absent" or
"no candidates" only where someone was asked and answered so, "not checked" where nobody was. A
reader who trusts "none found" resends; if nothing was asked, that is a duplicate made on the
product's word. Read from the evidence the ledger stored (reconciliation/apply.py,
gate/lookup.py), already redacted by the caller of these functions.
"""

NOT_ASKED = "nobody was asked whether it was written"


def asked_of(ev):
    """Who was asked, or None when nobody was."""
    ev = ev if isinstance(ev, dict) else {}
    if ev.get("source") == "caller_lookup":
        return (f"{ev.get('reported_by') or 'a runner'}, by its own lookup (reported via lookup-result; "
                f"the caller's word, not checked by the ledger)")
    if ev.get("no_reconciler") or ev.get("not_asked"):
        return None
    rec = ev.get("reconciler")
    if rec == "http_lookup":
        return "the HTTP lookup" + (f" GET {ev['lookup']}" if ev.get("lookup") else "")
    if rec == "wordpress":
        how = {"operation_key": "by operation key (durable-ops plugin)",
               "title": "by title (no durable-ops plugin)"}.get(ev.get("lookup"), "")
        site = f"WordPress site '{ev['site']}'" if ev.get("site") else "WordPress"
        return f"{site} through the publishing proxy" + (f", {how}" if how else "")
    if isinstance(rec, str) and rec:
        return f"the {rec} reconciler"
    if ev.get("lookup") or ev.get("verdict") or ev.get("source") == "kept_receipt":
        return "the reconciler"
    return None


def _answer(ev):
    parts = []
    if isinstance(ev.get("status"), int):
        parts.append(f"HTTP {ev['status']}")
    verdict = ev.get("verdict") or ev.get("reconciled")
    if ev.get("reported") and ev.get("reported") != verdict:
        parts.append(f"it reported {ev['reported']}, recorded as {verdict}")
    elif verdict:
        parts.append(str(verdict))
    if ev.get("detail"):
        parts.append(str(ev["detail"]))
    return ", ".join(parts) or "no verdict recorded"


def checked(ev, kind=None, has_reconciler=False):
    """{asked, of, answer, text}: what the stored evidence says was checked."""
    ev = ev if isinstance(ev, dict) else {}
    of = asked_of(ev)
    if ev.get("no_reconciler"):
        text = (f"Not checked: there is no reconciler for {ev['no_reconciler']} and no lookup was reported, "
                f"so {NOT_ASKED}.")
        return {"asked": False, "of": None, "answer": None, "text": text}
    if ev.get("not_asked"):
        return {"asked": False, "of": None, "answer": None, "text": f"Not checked: {ev.get('detail')}."}
    if "error" in ev and "verdict" not in ev:
        who = of or ("the reconciler for " + kind if kind else "the reconciler")
        text = (f"Not checked: the ledger tried to ask {who}, but the lookup could not be made ({ev['error']}); "
                f"no answer, it is asked again later.")
        return {"asked": False, "of": who, "answer": None, "text": text}
    if of is None:
        why = (f"a reconciler exists for {kind}, but it has not asked yet" if has_reconciler
               else f"there is no reconciler for {kind}" if kind else "no reconciler has run")
        return {"asked": False, "of": None, "answer": None,
                "text": f"Not checked: {why} and no lookup was reported, so {NOT_ASKED}."}
    answer = _answer(ev)
    return {"asked": True, "of": of, "answer": answer, "text": f"Asked {of}. It answered: {answer}."}


def error_text(last_error):
    """The last error recorded for the attempt, as what it says about a retry."""
    e = last_error if isinstance(last_error, dict) else {}
    status, kind, msg = e.get("http_status"), e.get("kind"), e.get("message")
    if isinstance(status, int) and (status >= 500 or status in (408, 409, 429)):
        return f"the remote answered HTTP {status} after the request was sent: it may have been written"
    if kind == "timeout":
        return "the request timed out after it was sent: it may have been written"
    if kind == "connection_reset":
        return "the connection was reset after the request was sent: it may have been written"
    if isinstance(status, int):
        return f"the last error was HTTP {status}" + (f": {msg}" if msg else "")
    if msg:
        return f"the last error: {msg}"
    return "no outcome was reported after it was sent (the run may have stopped mid-call): it may have been written"
