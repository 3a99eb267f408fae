"""The console in a real headless Chromium against a real ledger, publishing proxy and WordPress:
an approver sees the draft as WordPress holds it (title, featured image, SEO fields, body in a
sandboxed frame), approves or denies; a draft edited after the preview opened is refused; a
double click makes one approval; the timeline of a job interrupted at create_draft shows the
SENT, the reconciliation and the reuse in order.

Screenshots go to pytest's tmp dir; with DURABLE_SCREENSHOTS_DIR=docs/img they are kept there.
"""
import hashlib
import os
import struct
import time
import uuid
import zlib
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
from harness import TENANT, crash_at, resume
from support.browser import chromium

XSS_TITLE = '<script>window.__pwned=1</script> Ten ways to keep a run safe'
XSS_BODY = ('<p>Runs get interrupted. <strong>Resume them safely.</strong></p>'
            '<script>window.__pwned=2</script><img src="x" onerror="window.__pwned=3">'
            '<h2>Read state first</h2><p>Then reconcile, then continue.</p>')


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = chromium(tmp_path_factory.mktemp("chromium"), "1280,900", "--hide-scrollbars")
    driver.implicitly_wait(5)
    yield driver
    driver.quit()


def _png(w=240, h=140, rgb=(34, 113, 177), gradient=False):
    """A small PNG (no imaging library needed): the draft's featured image; `gradient` shades it
    from the colour at the top to a lighter one at the bottom (the docs pictures)."""
    def row(y):
        if not gradient:
            return b"\x00" + bytes(rgb) * w
        t = y / max(1, h - 1)
        return b"\x00" + bytes(int(c + (235 - c) * t * 0.8) for c in rgb) * w
    raw = zlib.compress(b"".join(row(y) for y in range(h)))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", raw) + chunk(b"IEND", b""))


class Shots:
    def __init__(self, browser, tmp_path):
        self.browser, self.dirs = browser, [tmp_path]
        if os.environ.get("DURABLE_SCREENSHOTS_DIR"):
            self.dirs.append(Path(os.environ["DURABLE_SCREENSHOTS_DIR"]))

    def take(self, name, height=900, scroll_to=None):
        self.browser.set_window_size(1280, height)
        if scroll_to:
            self.browser.execute_script("document.getElementById(arguments[0]).scrollIntoView()", scroll_to)
        for d in self.dirs:
            d.mkdir(parents=True, exist_ok=True)
            self.browser.save_screenshot(str(d / f"{name}.png"))
        self.browser.set_window_size(1280, 900)
        print(f"\n[console] screenshot {name}.png ({(self.dirs[-1] / f'{name}.png').stat().st_size} bytes)")


def _navigated(browser, click, url_part):
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    old = browser.find_element("tag name", "html")
    click()
    WebDriverWait(browser, 15, ignored_exceptions=(WebDriverException,)).until(EC.staleness_of(old))
    WebDriverWait(browser, 15).until(EC.url_contains(url_part))


def _sign_in(browser, stack, token, expect="/console/"):
    browser.delete_all_cookies()
    browser.get(f"{stack.ledger_url}/console/")
    browser.find_element("id", "token").send_keys(token)
    _navigated(browser, browser.find_element("id", "sign-in").click, expect)


class Runner:
    """What the article pipeline does around publish: a draft with image and SEO, then Begin: Publish."""

    def __init__(self, stack):
        self.stack, self.h = stack, stack.h()

    def draft(self, title, body, seo=None, image=None, alt="A blue hero image"):
        wp = self.stack.wp
        seo = seo or {"title": "Safe resumes | Durable Steps", "description": "How to resume interrupted automation runs safely.",
                      "keyword": "safe resume", "excerpt": "Resume runs without repeating a single write."}
        media = requests.post(wp.rest("/wp/v2/media"), auth=wp.auth, timeout=30, data=image or _png(),
                              headers={"Content-Type": "image/png", "Content-Disposition": 'attachment; filename="hero.png"'})
        assert media.status_code == 201, media.text
        requests.post(wp.rest(f"/wp/v2/media/{media.json()['id']}"), auth=wp.auth, timeout=30,
                      json={"alt_text": alt}).raise_for_status()
        post = requests.post(wp.rest("/wp/v2/posts"), auth=wp.auth, timeout=30, json={
            "title": title, "content": body, "excerpt": seo["excerpt"],
            "status": "draft", "featured_media": media.json()["id"],
            "meta": {"rank_math_title": seo["title"], "_yoast_wpseo_title": seo["title"],
                     "rank_math_description": seo["description"], "_yoast_wpseo_metadesc": seo["description"],
                     "rank_math_focus_keyword": seo["keyword"], "_yoast_wpseo_focuskw": seo["keyword"]}})
        assert post.status_code == 201, post.text
        return post.json()["id"]

    def stored(self, post_id):
        wp = self.stack.wp
        r = requests.get(wp.rest(f"/wp/v2/posts/{post_id}"), auth=wp.auth, params={"context": "edit"}, timeout=30)
        r.raise_for_status()
        return r.json()

    def publish_payload(self, post_id):
        p = self.stored(post_id)
        return {"post_id": post_id, "content_sha256": hashlib.sha256(p["content"]["raw"].encode()).hexdigest(),
                "title": p["title"]["raw"], "featured_media": p["featured_media"]}

    def begin_publish(self, job, post_id, token=None):
        led = self.stack.ledger_url
        if token is None:
            requests.put(f"{led}/v1/jobs/{job}", json={"pipeline": "article"}, headers=self.h, timeout=30).raise_for_status()
            token = requests.post(f"{led}/v1/jobs/{job}/lease", json={"owner": "pipeline", "ttl_s": 600, "takeover": True},
                                  headers=self.h, timeout=30).json()["fencing_token"]
        r = requests.post(f"{led}/v1/operations/begin", headers=self.h, timeout=30, json={
            "job_id": job, "action": "publish", "target": "wordpress:test", "fencing_token": token,
            "payload": self.publish_payload(post_id)})
        r.raise_for_status()
        return token, r.json()

    def publish(self, job, token, gate, post_id):
        body = {"operation_key": gate["operation"]["operation_key"], "job_id": job, "fencing_token": token,
                **{k: v for k, v in self.publish_payload(post_id).items() if k != "post_id"}}
        r = requests.post(f"{self.stack.proxy_url}/v1/sites/test/posts/{post_id}/publish", json=body,
                          headers=self.h, timeout=60)
        return r


def _approvals(stack, key):
    r = requests.get(f"{stack.ledger_url}/v1/operations/{quote(key, safe='')}", headers=stack.h(), timeout=30)
    return r.json()


def _pwned(browser):
    return browser.execute_script("return window.__pwned || null")


DOCS_TITLE = "Five checks before a resumed run publishes"
DOCS_BODY = ("<p>An automation run that was interrupted halfway has already written some things: a draft, "
             "an uploaded image, a few SEO fields. Starting it again from the top repeats them.</p>"
             "<h2>1. Read the state first</h2><p>Ask the ledger what the job reached and which steps are "
             "confirmed, and continue after the last one.</p>"
             "<h2>2. Reconcile what is unknown</h2><p>A step whose answer was lost is looked up in WordPress "
             "by its operation key before anything is sent again.</p>")
DOCS_SEO = {"title": "Five checks before a resumed run publishes | Durable Steps",
            "description": "Read state, reconcile unknown steps, then continue: how an interrupted article run publishes once.",
            "keyword": "resume automation run",
            "excerpt": "How an interrupted article run picks up where it stopped and publishes exactly once."}


def test_console_docs_pictures_show_a_realistic_draft(stack, browser, tmp_path):
    """docs/img/console-approvals.png and console-approval-preview.png (with DURABLE_SCREENSHOTS_DIR):
    an article as the pipeline would leave it for approval, not a test fixture."""
    from selenium.webdriver.common.by import By

    shots, run = Shots(browser, tmp_path), Runner(stack)
    job = f"article-{uuid.uuid4().hex[:6]}"
    post_id = run.draft(DOCS_TITLE, DOCS_BODY, seo=DOCS_SEO, image=_png(480, 270, (31, 92, 153), gradient=True),
                        alt="Checklist on a desk next to a laptop")
    _token, gate = run.begin_publish(job, post_id)
    assert gate["reason"] == "approval_required"
    browser.delete_all_cookies()
    browser.get(f"{stack.ledger_url}/console/approvals")
    browser.find_element(By.ID, "token").send_keys(stack.approver)
    _navigated(browser, browser.find_element(By.ID, "sign-in").click, "/console/approvals")
    row = [r for r in browser.find_elements(By.CSS_SELECTOR, "tr.approval-row") if job in r.text]
    assert len(row) == 1 and DOCS_TITLE in row[0].text
    for other in browser.find_elements(By.CSS_SELECTOR, "tr.approval-row"):
        if job not in other.text:  # the other tests' fixtures are not in the picture
            browser.execute_script("arguments[0].remove()", other)
    shots.take("console-approvals", 620)
    _navigated(browser, row[0].find_element(By.LINK_TEXT, "publish").click, "/console/approvals/")
    assert browser.find_element(By.ID, "pv-title").text == DOCS_TITLE
    assert "<script" not in browser.find_element(By.ID, "pv-title").text
    shots.take("console-approval-preview", 860)


def test_console_approver_previews_and_approves_a_publish_in_chromium(stack, browser, tmp_path):
    from selenium.webdriver.common.by import By

    run = Runner(stack)
    uid = uuid.uuid4().hex[:8]
    job = f"article-{uid}"
    post_id = run.draft(XSS_TITLE, XSS_BODY)
    token, gate = run.begin_publish(job, post_id)
    assert (gate["decision"], gate["reason"]) == ("halt", "approval_required")
    key, digest = gate["operation"]["operation_key"], gate["operation"]["request_hash"]

    # a runner token cannot sign in to approve
    browser.delete_all_cookies()
    browser.get(f"{stack.ledger_url}/console/approvals")
    browser.find_element(By.ID, "token").send_keys(stack.runner)
    _navigated(browser, browser.find_element(By.ID, "sign-in").click, "/console/")
    assert "Sign-in refused" in browser.find_element(By.CSS_SELECTOR, ".flash").text
    assert browser.find_elements(By.ID, "token")

    t0 = time.monotonic()
    browser.find_element(By.ID, "token").send_keys(stack.approver)
    _navigated(browser, browser.find_element(By.ID, "sign-in").click, "/console/approvals")
    row = [r for r in browser.find_elements(By.CSS_SELECTOR, "tr.approval-row") if job in r.text]
    assert len(row) == 1 and "Ten ways to keep a run safe" in row[0].text and "<script>" in row[0].text  # shown as text
    _navigated(browser, row[0].find_element(By.LINK_TEXT, "publish").click, "/console/approvals/")

    if not browser.find_elements(By.ID, "pv-title"):
        pytest.fail("no preview: " + browser.find_element(By.TAG_NAME, "main").text[:2000])
    assert browser.find_element(By.ID, "pv-title").text == XSS_TITLE
    assert "Resume runs without repeating" in browser.find_element(By.ID, "pv-excerpt").text
    seo = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".pv-seo")]
    assert seo[0].startswith("Safe resumes | Durable Steps") and seo[1].startswith("How to resume interrupted")
    img = browser.find_element(By.CSS_SELECTOR, "#pv-image img")
    assert img.get_attribute("alt") == "A blue hero image"
    assert browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth", img) == 240
    assert browser.find_element(By.ID, "digest").text == digest
    assert "still matches" in browser.find_element(By.ID, "match").text
    assert browser.find_element(By.ID, "asked-by").text == "runner:bootstrap-acme-runner"
    frame = browser.find_element(By.ID, "pv-body")
    assert frame.get_attribute("sandbox") == "" and "<script" not in frame.get_attribute("srcdoc")
    browser.switch_to.frame(frame)
    assert "Resume them safely." in browser.find_element(By.TAG_NAME, "body").text
    browser.switch_to.default_content()
    assert _pwned(browser) is None

    from selenium.webdriver.common.action_chains import ActionChains
    ActionChains(browser).double_click(browser.find_element(By.ID, "approve")).perform()  # a double click
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait
    WebDriverWait(browser, 15).until(EC.url_matches(r".*/console/approvals$"))
    clicked = time.monotonic() - t0
    assert "approved" in browser.find_element(By.CSS_SELECTOR, ".flash").text
    approvals = requests.get(f"{stack.ledger_url}/v1/approvals/pending", headers=stack.h(stack.approver),
                             timeout=30).json()["pending"]
    [mine] = [p for p in approvals if p["operation"]["operation_key"] == key]
    assert mine["status"] == "approved"
    a = mine["approval"]
    assert (a["content_digest"], a["target"], a["action"], a["task_version"]) == (digest, "wordpress:test", "publish", 1)
    assert a["approved_by"].startswith("approver:")
    # exactly one approval however many submits arrived: a second POST now is a no-op too
    again = requests.post(f"{stack.ledger_url}/v1/operations/{quote(key, safe='')}/approve",
                          headers=stack.h(stack.approver), json={"content_digest": digest}, timeout=30)
    assert (again.status_code, again.json()["created"], again.json()["approval"]["id"]) == (200, False, a["id"])

    # the workflow runs publish: dispatched once, published once
    token, gate = run.begin_publish(job, post_id, token)
    assert gate["decision"] == "dispatch", gate
    out = run.publish(job, token, gate, post_id)
    assert out.status_code == 200 and out.json()["outcome"] == "confirmed", out.text
    requests.post(f"{stack.ledger_url}/v1/operations/{quote(key, safe='')}/confirm", headers=stack.h(), timeout=30,
                  json={"fencing_token": token, "remote_id": out.json()["remote_id"]}).raise_for_status()
    assert run.stored(post_id)["status"] == "publish"
    granted = [e for e in _approvals(stack, key)["events"] if e["to_state"] == "SENT"]
    assert len(granted) == 1
    print(f"\n[console] approve click-through: {clicked:.1f} s from sign-in to approval")


def test_console_deny_and_edited_draft_in_chromium(stack, browser, tmp_path):
    from selenium.webdriver.common.by import By

    run = Runner(stack)
    uid = uuid.uuid4().hex[:8]
    deny_job, edit_job = f"deny-{uid}", f"edited-{uid}"
    deny_post = run.draft(f"Deny me {uid}", "<p>Off-brand.</p>")
    edit_post = run.draft(f"Edit me {uid}", "<p>First version.</p>")
    deny_token, deny_gate = run.begin_publish(deny_job, deny_post)
    _, edit_gate = run.begin_publish(edit_job, edit_post)
    _sign_in(browser, stack, stack.approver, "/console/approvals")

    t0 = time.monotonic()
    browser.get(f"{stack.ledger_url}/console/approvals/{quote(deny_gate['operation']['operation_key'], safe='')}")
    browser.find_element(By.ID, "reason").send_keys("off-brand tone; rewrite the intro")
    _navigated(browser, browser.find_element(By.ID, "deny").click, "/console/approvals")
    assert "denied" in browser.find_element(By.CSS_SELECTOR, ".flash").text
    _, again = run.begin_publish(deny_job, deny_post, deny_token)
    assert (again["decision"], again["reason"]) == ("halt", "approval_denied")
    assert again["denial"]["reason"] == "off-brand tone; rewrite the intro"
    assert run.stored(deny_post)["status"] == "draft"
    print(f"\n[console] deny click-through: {time.monotonic() - t0:.1f} s")

    # the preview is open; then someone edits the draft in WordPress; then Approve
    t0 = time.monotonic()
    browser.get(f"{stack.ledger_url}/console/approvals/{quote(edit_gate['operation']['operation_key'], safe='')}")
    assert "still matches" in browser.find_element(By.ID, "match").text
    wp = stack.wp
    requests.post(wp.rest(f"/wp/v2/posts/{edit_post}"), auth=wp.auth, timeout=30,
                  json={"content": "<p>Edited after the preview.</p>"}).raise_for_status()
    _navigated(browser, browser.find_element(By.ID, "approve").click, "/console/approvals/")
    flash = browser.find_element(By.CSS_SELECTOR, ".flash.error").text
    assert "Not approved" in flash and "edited after the preview" in flash
    assert "changed after this step asked" in browser.find_element(By.ID, "match").text  # reloaded page says so
    pending = requests.get(f"{stack.ledger_url}/v1/approvals/pending", headers=stack.h(stack.approver),
                           timeout=30).json()["pending"]
    [p] = [p for p in pending if p["operation"]["job_id"] == edit_job]
    assert p["status"] == "waiting" and p["approval"] is None
    assert run.stored(edit_post)["status"] == "draft"
    print(f"\n[console] edited-draft refusal: {time.monotonic() - t0:.1f} s")


def test_console_timeline_of_a_job_interrupted_at_create_draft_in_chromium(stack, browser, tmp_path):
    from selenium.webdriver.common.by import By

    shots = Shots(browser, tmp_path)
    uid = uuid.uuid4().hex[:8]
    job, title = f"interrupted-{uid}", f"Interrupted draft {uid}"
    _key, written = crash_at(stack, job, "test", title, "after_write")  # WordPress wrote; the caller died
    out = resume(stack, job, "test", title)
    assert out["decision"] == "reuse_receipt" and out["receipt"]["remote_id"] == str(written["remote_id"])
    assert resume(stack, job, "test", title)["decision"] == "reuse_receipt"
    assert stack.plugin_job_posts(job) == [int(written["remote_id"])]

    t0 = time.monotonic()
    _sign_in(browser, stack, stack.editor, "/console/review")
    browser.get(f"{stack.ledger_url}/console/jobs?q={uid}")
    rows = browser.find_elements(By.CSS_SELECTOR, "tr.job-row")
    assert [r.find_element(By.TAG_NAME, "code").text for r in rows] == [job]
    _navigated(browser, rows[0].find_element(By.LINK_TEXT, job).click, f"/console/jobs/{job}")
    text = browser.find_element(By.ID, "timeline").text
    order = ["lease acquired", "sent (attempt 1)", "lease taken over",
             "reconciled with the remote system: found → CONFIRMED", "receipt reused"]
    positions = [text.find(t) for t in order]
    assert -1 not in positions, (order, positions, text)
    assert positions == sorted(positions), (order, positions)
    assert text.count("receipt reused") == 2
    ops = browser.find_element(By.ID, "operations").text
    assert "create_draft" in ops and "CONFIRMED" in ops and f"#{written['remote_id']}" in ops
    links = [a.get_attribute("href") for a in browser.find_elements(By.CSS_SELECTOR, "#operations a")]
    assert f"{stack.wp.url}/wp-admin/post.php?post={written['remote_id']}&action=edit" in links
    print(f"\n[console] timeline: {time.monotonic() - t0:.1f} s")
    shots.take("console-timeline", 780, scroll_to="steps")
    browser.get(f"{stack.ledger_url}/console/jobs")
    shots.take("console-jobs", 700)
    # an outcome nobody can prove (no plugin, a same-titled post): the review queue page
    review_job, review_title = f"plain-{uid}", f"Plain draft {uid}"
    crash_at(stack, review_job, "plain", review_title, "before_send")
    stack.create_post_directly("plain", review_title)
    assert resume(stack, review_job, "plain", review_title)["decision"] == "needs_review"
    browser.get(f"{stack.ledger_url}/console/review")
    assert review_job in browser.find_element(By.TAG_NAME, "main").text
    shots.take("console-review-queue", 700)


def test_console_other_tenant_and_csrf_over_http(stack):
    """Attacks on the pages from outside a browser: forged forms, another tenant's ids."""
    import re

    s = requests.Session()
    page = s.get(f"{stack.ledger_url}/console/", timeout=30).text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    r = s.post(f"{stack.ledger_url}/console/login", data={"token": stack.approver}, allow_redirects=False, timeout=30)
    assert r.status_code == 403  # no CSRF token: refused
    r = s.post(f"{stack.ledger_url}/console/login", data={"token": stack.approver, "csrf": csrf},
               allow_redirects=False, timeout=30)
    assert r.status_code == 302
    assert s.get(f"{stack.ledger_url}/console/jobs/no-such-job", timeout=30).status_code == 404
    other_key = f"someone-else:{TENANT}x:v1:publish"
    assert s.get(f"{stack.ledger_url}/console/approvals/{quote(other_key, safe='')}", timeout=30).status_code == 404
    r = s.post(f"{stack.ledger_url}/console/approvals/{quote(other_key, safe='')}/approve",
               data={"digest": "0" * 64}, allow_redirects=False, timeout=30)
    assert r.status_code == 403  # CSRF first: a cross-site form never reaches the decision
