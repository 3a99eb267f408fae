"""The answer waitress gives to a request it refuses before the app sees it, in the API's error
shape ``{"error": {"code", "message", "details"}}``: 400 `malformed_request` (a chunk size, a
Content-Length, the start line or a header line it cannot read), 400
`unsupported_transfer_coding` (waitress's 501: the API answers no input with a 5xx), 413
`payload_too_large` (a body past the limit), 431 `headers_too_large` (a head past 64 KiB). So a
client reads every refusal the same way.

Imported in a server worker only (web/server.py): waitress's ``HTTPChannel.error_task_class`` is
the one place it builds such an answer. The connection is closed after it, as waitress does.
"""

import json
from http import HTTPStatus

from waitress.channel import HTTPChannel
from waitress.task import ErrorTask

from ..kernel.errors import HeadersTooLarge, MalformedRequest, PayloadTooLarge, UnsupportedTransferCoding

BY_STATUS = {400: MalformedRequest, 413: PayloadTooLarge, 431: HeadersTooLarge, 501: UnsupportedTransferCoding}
# waitress's own 500: the app raised before it began its answer (the Flask apps answer their own
# exceptions, so this is a server fault)
INTERNAL = {"error": {"code": "internal_error", "message": "internal error; see the service log", "details": {}}}


class JsonErrorTask(ErrorTask):
    def execute(self):
        e = self.request.error
        kind = BY_STATUS.get(e.code)
        # waitress's own words ("Invalid chunk size", "exceeds max_body of N"); a text that quotes
        # the request (a malformed header line) is not sent back.
        text = e.body if isinstance(e.body, str) and '"' not in e.body and len(e.body) <= 200 else e.reason
        status, answer = (kind.http_status, kind(text).to_dict()) if kind else (500, INTERNAL)
        body = json.dumps(answer).encode()
        self.status = f"{status} {HTTPStatus(status).phrase}"
        self.response_headers.append(("Content-Type", "application/json"))
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class Channel(HTTPChannel):
    error_task_class = JsonErrorTask
