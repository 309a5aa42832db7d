"""openclaw-lossless: a context engine for OpenClaw that never forgets.

Every message of every turn is stored verbatim in a local SQLite database; every turn the model gets the
recent window plus the most relevant older messages. See docs/ for the tour.
"""

__version__ = "0.1.0"
