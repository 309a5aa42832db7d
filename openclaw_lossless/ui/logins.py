"""The web UI's login sessions: random ids held in this process's memory, each with its own CSRF token.

Why server-side and not a signed cookie: logging out must end the session for good (a copied cookie is
worthless after it), and the token itself never leaves the login form. A restart ends every session (the
user logs in again); the count is bounded so a script posting the right token in a loop cannot grow memory.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass

SESSION_TTL_S = 12 * 3600  # a working day; then the token is asked for again
MAX_SESSIONS = 32  # browsers logged in at once; the oldest is dropped beyond this


@dataclass(frozen=True)
class UiSession:
    """One logged-in browser: the cookie's value, the token its forms carry, and when it ends."""

    session_id: str
    csrf: str
    expires_at: float

    def csrf_matches(self, submitted: str) -> bool:
        return hmac.compare_digest(submitted.encode(), self.csrf.encode())


class Sessions:
    """Create, find and end sessions; safe to call from the server's worker threads."""

    def __init__(self, ttl_s: float = SESSION_TTL_S, limit: int = MAX_SESSIONS) -> None:
        self.ttl_s = ttl_s
        self.limit = limit
        self._by_id: dict[str, UiSession] = {}
        self._lock = threading.Lock()

    def create(self) -> UiSession:
        session = UiSession(secrets.token_urlsafe(32), secrets.token_urlsafe(32), time.time() + self.ttl_s)
        with self._lock:
            self._drop_expired()
            while len(self._by_id) >= self.limit:
                oldest = min(self._by_id.values(), key=lambda s: s.expires_at)
                del self._by_id[oldest.session_id]
            self._by_id[session.session_id] = session
        return session

    def find(self, session_id: str | None) -> UiSession | None:
        """The live session a cookie names, or None (unknown, ended or expired)."""
        if not session_id:
            return None
        with self._lock:
            session = self._by_id.get(session_id)
            if session is None or session.expires_at <= time.time():
                return None
            return session

    def end(self, session_id: str) -> None:
        with self._lock:
            self._by_id.pop(session_id, None)

    def _drop_expired(self) -> None:
        now = time.time()
        for key in [k for k, s in self._by_id.items() if s.expires_at <= now]:
            del self._by_id[key]
