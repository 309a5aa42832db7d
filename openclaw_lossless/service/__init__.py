"""What the sidecar does, one room per job; ``sidecar.py`` opens the parts and wires these together.

- ``ingest.py`` (``Ingest``): every write of the conversation record: turns, messages sent outside a turn,
  a first session's history (``transcripts/`` writes through it), compactions, subagents, named snapshots.
- ``queries.py`` (``Queries``): every read: assemble's recall, search, pack, recover, a cited message,
  snapshots and compactions.
- ``status.py`` (``Status``): ``/healthz`` and ``/stats``, what an operator or a supervisor reads.
- ``size_cap.py`` (``SizeCap``): keeps the store under ``maxDbSizeMb`` by archiving, off the turn's path.

Why split: every feature used to pass through one class; now a write, a read and a report each live where a
newcomer would look for them, and each names the parts it uses.
"""
