"""Small HTTP client for the internal billing service.

Requests time out after 10 seconds by default, and failed requests are
retried up to 3 times with exponential backoff.
"""

import json
import logging
import random
import time
import urllib.error
import urllib.request

log = logging.getLogger(__name__)

BASE_URL = "https://billing.internal.example.com/v2"
DEFAULT_TIMEOUT = 10  # seconds
MAX_RETRIES = 3  # attempts after the first one
BACKOFF_FACTOR = 0.5
RETRYABLE_STATUS = {429, 502, 503, 504}
USER_AGENT = "billing-client/1.4"


class BillingError(Exception):
    def __init__(self, status, message):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


def _backoff(attempt):
    """Seconds to wait before retry number `attempt` (1-based), with jitter."""
    delay = BACKOFF_FACTOR * (2 ** (attempt - 1))
    return delay + random.uniform(0, delay / 4)


class BillingClient:
    def __init__(self, token, base_url=BASE_URL, timeout=DEFAULT_TIMEOUT):
        self.token = token
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    def _request(self, method, path, payload=None):
        url = f"{self.base_url}/{path.lstrip('/')}"
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/json",
            "User-Agent": USER_AGENT,
        }
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        return urllib.request.urlopen(request, timeout=self.timeout)

    def call(self, method, path, payload=None):
        """Send a request and return the decoded JSON body.

        Retries up to MAX_RETRIES (3) times on connection errors and on
        the status codes listed in RETRYABLE_STATUS.
        """
        attempt = 0
        while True:
            try:
                with self._request(method, path, payload) as response:
                    body = response.read()
                    return json.loads(body) if body else None
            except urllib.error.HTTPError as exc:
                if exc.code not in RETRYABLE_STATUS or attempt >= MAX_RETRIES:
                    detail = exc.read().decode("utf-8", "replace")
                    raise BillingError(exc.code, detail) from exc
                reason = f"HTTP {exc.code}"
            except urllib.error.URLError as exc:
                if attempt >= MAX_RETRIES:
                    raise
                reason = str(exc.reason)
            attempt += 1
            delay = _backoff(attempt)
            log.warning(
                "%s %s failed (%s); retry %d/%d in %.2fs",
                method, path, reason, attempt, MAX_RETRIES, delay,
            )
            time.sleep(delay)

    def get_invoice(self, invoice_id):
        return self.call("GET", f"invoices/{invoice_id}")

    def list_invoices(self, customer_id, status=None):
        path = f"customers/{customer_id}/invoices"
        if status:
            path += f"?status={status}"
        return self.call("GET", path)

    def create_credit_note(self, invoice_id, amount_cents, reason):
        payload = {"invoice_id": invoice_id, "amount_cents": amount_cents, "reason": reason}
        return self.call("POST", "credit-notes", payload)

    def void_invoice(self, invoice_id):
        return self.call("POST", f"invoices/{invoice_id}/void")
