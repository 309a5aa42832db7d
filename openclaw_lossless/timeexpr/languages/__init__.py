"""The languages ``timeexpr`` reads, one module each; add a language by adding its module here.

Each module declares its words and patterns and ends in a ``LANGUAGE`` (``timeexpr.language.Language``).
"""

from __future__ import annotations

from openclaw_lossless.timeexpr.language import Language
from openclaw_lossless.timeexpr.languages import chinese, english, german, spanish

LANGUAGES: dict[str, Language] = {
    lang.code: lang for lang in (english.LANGUAGE, chinese.LANGUAGE, german.LANGUAGE, spanish.LANGUAGE)
}
