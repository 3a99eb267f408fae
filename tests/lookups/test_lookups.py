"""Lookups decide only on proof (issue 35), against the answer shapes of real APIs, in real n8n
2.40.7 with the real ledger: one n8n server and one ledger for the whole module, every case at
once (cases.py). Counted at the remote (remote.py):

    (a) Gated HTTP Request with its built-in Look Up (Look Up Match Field as docs/builders.md says)
    (b) Gated Sub-Workflow whose lookup sub-workflow is n8n's HTTP Request + Set (docs/builders.md)
    (c) Begin Step without Look Up; the ledger's generic HTTP reconciler (DURABLE_RECONCILE_HTTP)

Per case: never two writes; never a step done (Done, Done Before, CONFIRMED) that never reached
the remote, nor done with another order's ID; found -> Done Before with the one write;
undecidable -> NEEDS_REVIEW, nothing resent; absent -> sent again, one write in all; a lookup
that timed out -> no verdict, the step stays unknown. The table goes to stdout and to
$DURABLE_CACHE/lookups-suite.md.
"""
from __future__ import annotations

import json

import pytest
from cases import LookupStack, cases, expected, results_dir, run_cases, table
from remote import ShapesRemote

COLUMNS = [("a", "(a) Gated HTTP Request"), ("b", "(b) Gated Sub-Workflow"), ("c", "(c) ledger reconciler")]


@pytest.fixture(scope="module")
def outcome(tmp_path_factory):
    remote = ShapesRemote()
    st = LookupStack(tmp_path_factory.mktemp("lookups"))
    try:
        st.start(remote)
        rows = run_cases(st, remote, cases())
        rows = [{**r, "column": r["variant"], "expected": expected(r["variant"], r["shape"], r["present"])} for r in rows]
        text = table([r for r in rows if r["variant"] != "c"], COLUMNS[:2]) + "\n" + table(
            [r for r in rows if r["variant"] == "c"], COLUMNS[2:]) + (
            "(c) undecidable = NEEDS_REVIEW; for r404 the reconciler's verdict is absent, not definitive, which "
            "also goes to review\n")
        print("\n" + text)
        for r in rows:
            print("DURABLE_LOOKUPS_SUITE " + json.dumps(r, sort_keys=True))
        out = results_dir()
        out.mkdir(parents=True, exist_ok=True)
        (out / "lookups-suite.md").write_text(text)
        yield rows
    finally:
        remote.close()
        st.stop()


def test_lookups_never_write_twice_nor_mark_done_without_a_write(outcome):
    assert [r["order_id"] for r in outcome if r["writes"] > 1] == []
    assert [r["order_id"] for r in outcome if r["done_without_write"]] == []
    assert [(r["order_id"], r["remote_id"]) for r in outcome if r["wrong_id"]] == []


def test_lookups_end_as_the_rule_says(outcome):
    wrong = [(r["order_id"], r["verdict"], r["expected"], r["reason"], r["error"]) for r in outcome
             if r["verdict"] != r["expected"]]
    assert wrong == []


def test_lookups_found_end_done_before_with_the_one_write(outcome):
    found = [r for r in outcome if r["expected"] == "found"]
    assert found and all(r["writes"] == 1 and r["sends"] == 1 and r["ledger"] == "CONFIRMED" for r in found), found


def test_lookups_undecidable_go_to_review_without_a_resend(outcome):
    review = [r for r in outcome if r["expected"] == "undecidable"]
    bad = [r["order_id"] for r in review
           if r["ledger"] != "NEEDS_REVIEW" or r["sends"] != 1 or r["writes"] != (1 if r["present"] else 0)]
    assert review and bad == []


def test_lookups_that_time_out_leave_the_step_unknown(outcome):
    slow = [r for r in outcome if r["shape"] == "slow"]
    assert slow and all(r["ledger"] in ("UNKNOWN", "SENT") and r["reason"] == "lookup_failed" and r["sends"] == 1
                        for r in slow), slow
