"""How many tokens a text costs a model: a per-script weighted character count, the same in the plugin.

Characters / 4 is right for English but counts Chinese, Japanese or Korean at a quarter of a token a character
where real tokenizers spend about one, so a recall block sized by it overran its token cap in those languages
(and digits, code, Cyrillic, Greek, Arabic, Hebrew, Indic scripts and emoji were undercounted too). Each
UTF-16 code unit costs a weight in hundredths of a token by its script; a text costs the sum, rounded up.

The weights are calibrated against real token counts (``tests/fixtures/token_reference.json``, made by
``benchmarks/token_reference.py``) of OpenAI's ``cl100k_base``, the hungrier of the two published encodings on
every script there (``o200k_base`` spends up to three times fewer tokens on some scripts): a cap must hold for a
host whose tokenizer is not frugal, and recalling a little less than the budget allows costs little.

``descriptorTokens``/``tokenUnits`` in ``plugin/index.js`` implement the same table: both sides must give the
same number for every text (``tests/e2e/test_plugin_contract.py`` checks every block). A change here is
a change there, and to the ``descriptor`` section of ``plugin-manifest.json``.
"""

from __future__ import annotations

UNIT = 100  # weights are hundredths of a token

# ASCII letters and whitespace: English words run ~5 characters a token.
LIGHT = 20
# ASCII digits, punctuation and control characters: numbers split into 1-3 digit tokens, code is dense.
DENSE = 70
# U+0080-U+00FF (Latin-1: accented letters, which break a word into pieces, and symbols).
LATIN1 = 160
# Any UTF-16 code unit of a block below that names no weight.
OTHER = 100

# (first block, last block, weight): a block is 256 code points, the high byte of a UTF-16 code unit. Blocks
# this coarse keep the count a table lookup per code unit, and scripts keep to their blocks. A character
# outside the Basic Multilingual Plane (emoji, rare ideographs) is two code units, a high surrogate that
# carries its whole weight and a low one that weighs nothing.
BLOCKS: tuple[tuple[int, int, int], ...] = (
    (0x01, 0x02, 160),  # Latin extended A/B, IPA
    (0x03, 0x03, 100),  # combining marks, Greek
    (0x04, 0x04, 55),  # Cyrillic
    (0x05, 0x05, 110),  # Cyrillic supplement, Armenian, Hebrew
    (0x06, 0x06, 85),  # Arabic
    (0x09, 0x0D, 115),  # Devanagari, Bengali, Gurmukhi, Gujarati, Oriya, Tamil, Telugu, Kannada, Malayalam, Sinhala
    (0x0E, 0x0E, 95),  # Thai, Lao
    (0x11, 0x11, 120),  # Hangul jamo
    (0x1E, 0x1E, 160),  # Latin extended additional (Vietnamese)
    (0x22, 0x2B, 150),  # math, technical symbols, box drawing, shapes, misc symbols, dingbats (✅ ❌ ⚠)
    (0x30, 0x30, 80),  # CJK punctuation, Hiragana, Katakana
    (0x31, 0x9F, 120),  # Bopomofo, compatibility jamo, CJK ideographs (extension A and unified)
    (0xAC, 0xD7, 120),  # Hangul syllables
    (0xD8, 0xDB, 250),  # high surrogates: a character beyond the BMP, mostly emoji
    (0xDC, 0xDF, 0),  # low surrogates: counted with their high surrogate
    (0xF9, 0xFA, 120),  # CJK compatibility ideographs
    (0xFF, 0xFF, 70),  # full-width and half-width forms
)
_LIGHT_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz \t\n\r\x0b\x0c"


def _block_table() -> bytes:
    table = bytearray([OTHER] * 256)
    for first, last, weight in BLOCKS:
        table[first : last + 1] = bytes([weight]) * (last - first + 1)
    return bytes(table)


_BLOCK_WEIGHTS = _block_table()


def _ascii_units(raw: bytes) -> int:
    dense = len(raw.translate(None, _LIGHT_BYTES))
    return (len(raw) - dense) * LIGHT + dense * DENSE


def token_units(text: str) -> int:
    """The text's cost in hundredths of a token (sum these before rounding, as ``descriptor_tokens`` does).

    Every step is a C-speed pass over the text, no Python per character: this runs on every message stored.
    """
    if text.isascii():
        return _ascii_units(text.encode("ascii"))
    ascii_only = text.encode("ascii", "ignore")
    high = text.encode("utf-16-be", "surrogatepass")[::2]  # the block of each code unit
    latin1 = high.count(0) - len(ascii_only)
    weights = high.translate(_BLOCK_WEIGHTS, b"\x00")  # block 0, counted above, left out
    return _ascii_units(ascii_only) + latin1 * LATIN1 + sum(weights)


def tokens_of_units(units: int) -> int:
    return -(-units // UNIT)


def estimate_tokens(text: str) -> int:
    """Tokens a model will likely spend on the text (rounded up)."""
    return tokens_of_units(token_units(text))
