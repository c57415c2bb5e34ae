"""A minimal LAVA REST API v0.2 client: token auth, GETs retried on errors and 5xx, paginated
lists followed (never to another host)."""

from __future__ import annotations

from urllib.parse import urlsplit

from bot.lab.backends.base import LabError
from bot.lab.backends.rundir import printable


class LavaClient:
    """Minimal LAVA REST API v0.2 client (token auth; GETs retried on errors/5xx)."""

    def __init__(self, url: str, token: str | None, timeout: float = 30.0, retries: int = 3):
        import requests
        from requests.adapters import HTTPAdapter
        from urllib3.util.retry import Retry

        self.base = url.rstrip("/") + "/api/v0.2/"
        self.timeout = timeout
        self.session = requests.Session()
        self.session.headers["User-Agent"] = "regtriage-lab-lava"
        self.session.headers["Accept"] = "application/json"
        if token:
            self.session.headers["Authorization"] = f"Token {token}"
        retry = Retry(total=retries, connect=retries, read=retries, status=retries, backoff_factor=0.5,
                      status_forcelist=(500, 502, 503, 504), allowed_methods=frozenset({"GET"}),
                      raise_on_status=False)
        adapter = HTTPAdapter(max_retries=retry)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)

    def _url(self, path: str) -> str:
        return path if path.startswith(("http://", "https://")) else self.base + path.lstrip("/")

    def _get(self, path: str, params: dict):
        import requests

        try:
            r = self.session.get(self._url(path), params=params or None, timeout=self.timeout)
        except requests.RequestException as exc:
            raise LabError(f"LAVA unreachable: {exc}") from None
        if r.status_code != 200:
            raise LabError(f"LAVA GET {path}: HTTP {r.status_code} {printable(r.text, 200)}")
        return r

    def get(self, path: str, **params):
        try:
            return self._get(path, params).json()
        except ValueError:
            raise LabError(f"LAVA GET {path}: not JSON") from None

    def get_text(self, path: str, **params) -> str:
        return self._get(path, params).text

    def get_all(self, path: str, limit: int = 200) -> list:
        """All results of a paginated list endpoint (follows ``next``)."""
        out: list = []
        page = self.get(path, limit=limit)
        for _ in range(10000):
            if isinstance(page, list):  # unpaginated server
                return out + page
            out += page.get("results", [])
            nxt = page.get("next")
            if not nxt:
                return out
            if urlsplit(nxt).netloc != urlsplit(self.base).netloc:  # never follow a link elsewhere
                nxt = self.base + nxt.split("/api/v0.2/", 1)[-1]
            page = self.get(nxt)
        raise LabError(f"LAVA GET {path}: too many pages")

    def submit(self, definition: str) -> list[int]:
        import requests

        try:
            r = self.session.post(self.base + "jobs/", json={"definition": definition}, timeout=self.timeout)
        except requests.RequestException as exc:
            raise LabError(f"LAVA unreachable: {exc}") from None
        if r.status_code != 201:
            raise LabError(f"LAVA rejected the job: HTTP {r.status_code} {printable(r.text, 500)}")
        ids = r.json().get("job_ids")
        if not isinstance(ids, list) or not ids or not all(type(i) is int for i in ids):
            raise LabError(f"LAVA submit: unexpected answer {printable(r.text, 200)}")
        return ids

    def validate(self, definition: str) -> dict:
        import requests

        try:
            r = self.session.post(self.base + "jobs/validate/", json={"definition": definition}, timeout=self.timeout)
        except requests.RequestException as exc:
            raise LabError(f"LAVA unreachable: {exc}") from None
        return {"status_code": r.status_code, "body": r.json() if r.headers.get("content-type", "").startswith(
            "application/json") else r.text}

    def job(self, job_id: int) -> dict:
        return self.get(f"jobs/{int(job_id)}/")

    def cancel(self, job_id: int) -> None:
        self.get(f"jobs/{int(job_id)}/cancel/")

    def tests(self, job_id: int) -> list[dict]:
        return self.get_all(f"jobs/{int(job_id)}/tests/")

    def suites(self, job_id: int) -> list[dict]:
        return self.get_all(f"jobs/{int(job_id)}/suites/")
