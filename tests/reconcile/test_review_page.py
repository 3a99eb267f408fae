"""A WordPress without the mu-plugin: a same-titled post is only a hint, so the operation waits
for an editor, who resolves it on the review page in a real headless Chromium (no JavaScript
needed by the page; Selenium only clicks)."""
import uuid

import pytest
from harness import crash_at, resume
from support.browser import chromium



@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = chromium(tmp_path_factory.mktemp("chromium"), "1280,1500")
    driver.implicitly_wait(5)
    yield driver
    driver.quit()


def _job_section(driver, job):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.XPATH, f"//h2[code[text()='{job}']]/following-sibling::table[1]")


def test_review_plain_site_title_match_resolved_by_editor_in_chromium(stack, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import Select, WebDriverWait

    def navigated(click, url_part):
        """Click, then wait for the new page: a form post or link does not block Selenium."""
        from selenium.common.exceptions import WebDriverException

        old = browser.find_element(By.TAG_NAME, "html")
        click()
        # Chromedriver sometimes reports a node of the old page as "does not belong to the
        # document" (a plain WebDriverException) instead of stale: poll again, it turns stale.
        WebDriverWait(browser, 15, ignored_exceptions=(WebDriverException,)).until(EC.staleness_of(old))
        WebDriverWait(browser, 15).until(EC.url_contains(url_part))

    uid = uuid.uuid4().hex[:10]
    job, title = f"plain-{uid}", f"Plain title {uid}"
    key, _ = crash_at(stack, job, "plain", title, "before_send")
    by_hand = stack.create_post_directly("plain", title)  # same title, no key, no job: proves nothing

    out = resume(stack, job, "plain", title)

    assert out["decision"] == "needs_review", out
    assert out["reconciliation"]["verdict"] == "undecidable"
    item = stack.review_item(key)
    assert item["state"] == "NEEDS_REVIEW"
    assert [(c["id"], c["match"]) for c in item["candidates"]] == [(by_hand, "title")]
    assert item["candidates"][0]["edit_url"] == f"{stack.wp_plain.url}/wp-admin/post.php?post={by_hand}&action=edit"
    assert stack.drafts_titled("plain", title) == [by_hand]  # nothing created
    assert resume(stack, job, "plain", title)["decision"] == "needs_review"
    assert stack.drafts_titled("plain", title) == [by_hand]

    # The editor: sign in -> queue -> item -> choose the candidate -> confirm -> gone from the queue.
    browser.get(f"{stack.ledger_url}/review")
    browser.find_element(By.ID, "token").send_keys(stack.runner)  # a runner is not an editor
    navigated(browser.find_element(By.ID, "sign-in").click, "/review")
    assert "Sign-in refused" in browser.find_element(By.CSS_SELECTOR, ".flash").text
    browser.find_element(By.ID, "token").send_keys(stack.editor)
    navigated(browser.find_element(By.ID, "sign-in").click, "/review")
    assert "Signed in" in browser.find_element(By.CSS_SELECTOR, ".flash").text
    [section] = _job_section(browser, job)
    assert title in section.text and "NEEDS_REVIEW" in section.text
    navigated(section.find_element(By.LINK_TEXT, "create_draft").click, "/review/item/")

    assert key in browser.find_element(By.TAG_NAME, "main").text
    candidates = browser.find_element(By.ID, "candidates")
    assert f"#{by_hand}" in candidates.text and title in candidates.text
    editor_link = candidates.find_element(By.LINK_TEXT, "open in the WordPress editor")
    assert editor_link.get_attribute("href").endswith(f"post.php?post={by_hand}&action=edit")
    shot = tmp_path / "review-item.png"
    browser.save_screenshot(str(shot))
    print(f"\n[review] item page screenshot: {shot}")

    browser.find_element(By.ID, "remote_id").send_keys("999999")  # not on the site: the ledger re-verifies
    navigated(browser.find_element(By.ID, "confirm").click, "/review/item/")
    assert "Not resolved" in browser.find_element(By.CSS_SELECTOR, ".flash").text
    assert stack.operation(key)["operation"]["state"] == "NEEDS_REVIEW"

    Select(browser.find_element(By.ID, "candidate")).select_by_value(str(by_hand))
    browser.find_element(By.ID, "note").send_keys("checked in wp-admin: this is our draft")
    navigated(browser.find_element(By.ID, "confirm").click, "/review")
    assert "/item/" not in browser.current_url

    assert "confirm recorded" in browser.find_element(By.CSS_SELECTOR, ".flash").text
    assert _job_section(browser, job) == []
    assert key not in [i["operation_key"] for i in stack.review_queue()]
    op = stack.operation(key)
    assert (op["operation"]["state"], op["operation"]["remote_id"]) == ("CONFIRMED", str(by_hand))
    last = op["events"][-1]
    assert last["actor"].startswith("editor:") and last["detail"]["review"] == "confirm"
    again = resume(stack, job, "plain", title)
    assert again["decision"] == "reuse_receipt" and again["receipt"]["remote_id"] == str(by_hand)
    assert stack.drafts_titled("plain", title) == [by_hand]
