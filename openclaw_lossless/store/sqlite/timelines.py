"""A session's timeline: one page of its messages, and what happened between them.

Why its own module: the web UI draws a session as a line of messages with the events that cut into it: a
compaction (and its automatic snapshot), a snapshot named by an operator, a subagent spawned from it, and the
``/new`` that began it or ended it (a reset keeps the ``sessionKey`` and starts a new ``sessionId``). A session
can hold 100,000 messages, so a page is one short range of ``messages_by_session`` and every event is read for
that range only: the cost grows with the page, never with the history.

Where an event goes: a compaction or snapshot records the last message the session had then, so it sits right
after that message (before the first one with a greater id, should that one be forgotten since). A spawn has
only its time, so it sits before the first message dated after it. A page holds the events from the message
before it (exclusive of earlier pages) up to its own last message; the newest page also holds those after.
"""

from __future__ import annotations
