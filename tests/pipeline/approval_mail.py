"""The approval request as the approvers receive it (issue 38): the message the workflow's Send
Approval Request node mailed, read back from the mailbox over IMAP; its links; the message
rendered in Chromium as a mail client shows it; the approver following the link in Chromium."""
from __future__ import annotations

import html
import os
import re
import shutil
from email.message import EmailMessage
from html.parser import HTMLParser
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class _Hrefs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.hrefs += [v for k, v in attrs if k == "href" and v]


def parts(msg: EmailMessage) -> tuple[str, str]:
    """The message's plain text and HTML bodies (multipart/alternative, as Send Email sends both)."""
    text, body = msg.get_body(("plain",)), msg.get_body(("html",))
    return (text.get_content() if text else ""), (body.get_content() if body else "")


def links(msg: EmailMessage) -> list[str]:
    """Every link of the message: the HTML part's hrefs and the URLs written in the text part."""
    text, body = parts(msg)
    found = _Hrefs()
    found.feed(body)
    urls = found.hrefs + re.findall(r"https?://[^\s<>\"')]+", text)
    return list(dict.fromkeys(urls))


def render(msg: EmailMessage, out: Path, shot_dir: Path, window="900,560") -> Path:
    """The message as a mail client shows it: its headers, then its HTML part (in a sandboxed
    iframe, as clients isolate a message), screenshotted in headless Chromium.
    DURABLE_UPDATE_SCREENSHOTS=1 also copies it to docs/img/."""
    from support.browser import chromium

    _text, body = parts(msg)
    rows = "".join(f"<tr><th>{h}</th><td>{html.escape(str(msg[h] or ''))}</td></tr>"
                   for h in ("From", "To", "Subject", "Date"))
    page = shot_dir / "message.html"
    page.write_text(f"""<!doctype html><meta charset="utf-8"><title>{html.escape(str(msg['Subject']))}</title>
<style>body{{margin:0;font:14px system-ui,sans-serif;background:#fff;overflow:hidden}}
.hdr{{background:#f3f4f6;border-bottom:1px solid #d1d5db;padding:14px 20px}}
.hdr th{{text-align:right;color:#6b7280;font-weight:500;padding:2px 10px 2px 0;vertical-align:top}}
iframe{{display:block;border:0;width:100%;height:420px;background:#fff}}</style>
<div class="hdr"><table>{rows}</table></div>
<iframe sandbox srcdoc="{html.escape(body, quote=True)}"></iframe>""")
    browser = chromium(shot_dir / "mail-profile", window)
    try:
        browser.get(page.as_uri())
        browser.save_screenshot(str(out))
    finally:
        browser.quit()
    if os.environ.get("DURABLE_UPDATE_SCREENSHOTS") == "1":
        shutil.copy(out, REPO / "docs" / "img" / out.name)
    return out


def approve_from_link(link: str, approver_token: str, shot_dir: Path, shot: Path | None = None) -> str:
    """The approver opens the message's link in Chromium, signs in with their token, sees the
    decision page (preview) and approves there. Returns the page's text after the click."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait
    from support.browser import chromium

    browser = chromium(shot_dir / "approver-profile", "1100,1050")
    try:
        browser.get(link)
        WebDriverWait(browser, 30).until(EC.presence_of_element_located((By.ID, "token")))
        browser.find_element(By.ID, "token").send_keys(approver_token)
        browser.find_element(By.ID, "sign-in").click()
        WebDriverWait(browser, 30).until(EC.element_to_be_clickable((By.ID, "approve")))
        if shot is not None:
            browser.save_screenshot(str(shot))
        button = browser.find_element(By.ID, "approve")
        button.click()
        WebDriverWait(browser, 30).until(EC.staleness_of(button))  # the decision posted, the next page loaded
        WebDriverWait(browser, 30).until(EC.presence_of_element_located((By.CSS_SELECTOR, ".flash")))
        return browser.find_element(By.TAG_NAME, "body").text
    finally:
        browser.quit()
