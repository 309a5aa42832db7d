"""The tests a rule's match must pass besides its pattern: is this value a secret, or a name for one?

A regular expression finds ``password = <value>``; whether ``<value>`` is the password (``hunter2``) or code
that refers to one (``os.environ["PASSWORD"]``, ``None``, ``user_password``) is decided here, and so is
whether a variable's name says it holds a secret (``DB_PASSWORD``, ``apiKey``) or merely mentions one
(``token_count``, ``password_field``). Rules name a check in ``secret_rules.toml``; each check returns the
span to replace (the value, trimmed of trailing punctuation) or None to leave the match alone.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Literal

Span = tuple[int, int]
Check = Callable[[re.Match[str]], Span | None]
NameClass = Literal["password", "strong", "weak"] | None

_SEGMENTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_PASSWORD_WORDS = frozenset(
    {"password", "passwd", "pwd", "pass", "passphrase", "passcode", "pswd", "pw", "passwort", "pword"}
)
_STRONG_WORDS = frozenset({"secret", "token", "credential", "credentials", "creds", "apikey", "cookie", "dsn"})
_WEAK_WORDS = frozenset({"key", "auth", "signature", "sig", "salt", "sas", "pin"})
# Before a trailing "key", these say what kind of key: a credential, not a map or sort key.
_KEY_QUALIFIERS = frozenset(
    {
        "api", "access", "secret", "private", "client", "account", "master", "auth", "app", "license", "licence",
        "encryption", "encrypt", "enc", "signing", "sign", "shared", "service", "subscription", "deploy", "ssh",
        "consumer", "webhook", "session", "jwt", "hmac", "crypto", "admin", "write", "read", "server", "storage",
        "integration", "bot", "personal", "ingest", "sdk", "live", "test", "prod", "cipher", "aes", "gpg", "pgp",
        "root", "user", "partner", "merchant", "rest", "management", "primary", "secondary", "routing", "host",
        "function", "functions", "publishable", "restricted", "openai", "anthropic", "stripe", "google", "maps",
    }
)  # fmt: skip
# Pagination, counting and parsing tokens are not credentials.
_NOT_SECRET_QUALIFIERS = frozenset(
    {"page", "next", "prev", "previous", "continuation", "pagination", "sync", "cancellation", "cancel", "max",
     "min", "num", "total", "count", "csrf_field", "primary_key", "foreign", "sort", "cache", "partition", "row",
     "hash", "lookup", "map", "dict", "idempotency", "public", "pub", "end", "start", "stop", "bos", "eos", "pad",
     "unk", "sep", "cls", "mask", "special", "input", "output", "prompt", "completion", "reasoning", "cached",
     "advancement", "run"}
)  # fmt: skip
_NOT_PASSWORDS = frozenset(
    {"bypass", "compass", "encompass", "overpass", "underpass", "surpass", "trespass", "firstpass", "multipass"}
)
_CODE_WORDS = frozenset(
    {
        "true", "false", "null", "none", "nil", "undefined", "yes", "no", "on", "off", "required", "optional",
        "str", "string", "int", "bool", "bytes", "object", "any", "self", "this", "new", "lambda", "function",
        "await", "async", "default", "password", "passwd", "secret", "token", "key", "apikey", "api_key",
        "redacted", "masked", "hidden", "empty", "unset", "changeme_in_prod", "env", "environ", "getenv",
        "fn", "func", "def", "return", "const", "let", "var", "secretstr", "optional[str]", "str|none",
    }
)  # fmt: skip
_STOPWORD_TEXT = """
    a an the in on at to of for not no yes and or but is it its it's this that these those what which who how
    why where when still now just also too very so same different new old wrong right correct incorrect invalid
    valid expired required optional needed missing empty blank set reset changed stored saved kept written shared
    sent secure safe strong weak long short simple easy hard complex hashed encrypted protected hidden visible ok
    okay fine good bad there here my your our their his her being been something anything nothing please you i we
    they he she me him them us going gonna about like probably definitely always never usually generated random
    unique personal private public secret mine yours printed managed handled rotated provided given included
    attached below above following as if because since from by with without into only exactly more less than over
    under case sensitive field fields manager managers policy policies requirement requirements reset. change
    changes protection prompt prompts dialog screen page form box input hint hints length strength rules rule
    expiry expiration entry entries will would should could can may might must has have had do does did be
    were am le la les des de du un une el los las por para que con sin und der die das ist nicht ein eine
    login logins account accounts user users username usernames email emails specified supplied entered typed
    accepted rejected used found verified checked matched ignored removed deleted updated received requested
    asked prompted read parsed encoded decoded truncated needs contains has matches expected got hacked stolen
    leaked compromised exposed breached forgotten lost guessed cracked locked blocked see shown displayed obvious
    complicated somewhere expires expiring expire known unknown identical similar"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_REFERENCE = re.compile(
    r"""^(?:\$|%[\w(]|\{\{|<[^>]*>?$|\[REDACTED|process\.env|os\.(?:environ|getenv)|env\(|ENV\[|getenv|
    secrets\.|vault:|!vault|ENC\[|\*{3,}|[*_]{1,2}$|\.{3}|x{4,}$|X{4,}$|your[_\- ]|YOUR_|<your|placeholder|
    example|dummy|\{[\w.]+\}$|@Value|\#\{)""",
    re.VERBOSE,
)
_TEMPLATE = re.compile(r"\{\d*\}|%[sdr]|%\(\w+\)")
# OpenClaw's own session keys (``agent:<agentId>:<name>``, e.g. a sessions_spawn result's ``childSessionKey``)
# name a conversation, they grant nothing; redacting them would also hide which child a parent spawned.
_OPENCLAW_SESSION_KEY = re.compile(r"^agent:[A-Za-z0-9][A-Za-z0-9_.-]{0,127}:[^\s\"']+$")
_HEX_LITERAL = re.compile(r"^0[xX][0-9a-fA-F]{1,16}$")
_SNAKE = re.compile(r"^[a-z]+(?:_[a-z0-9]+)+$")
_DOTTED_WORDS = re.compile(r"^[a-z_]+(?:\.[a-z_]+)+$")
_SECRET_WORD = re.compile(r"(?i)pass|pwd|secret|token|key|auth|cred|cookie|sig")
_WORDS = re.compile(r"(?:[A-Z][a-z]{2,}|[a-z]{3,})+")
_DOTTED_NUMBER = re.compile(r"^v?\d+(?:\.\d+)+$")
_CALL_OR_ATTRIBUTE = re.compile(r"^[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*(?:\(|\[|$)")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TRAILING = ".,;:!?)]}>\"'`”’"


def entropy(text: str) -> float:
    """Shannon entropy in bits per character: random keys score high, words and counters low."""
    if not text:
        return 0.0
    counts = Counter(text)
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


def name_class(name: str) -> NameClass:
    """Whether a variable, key, header or flag name says its value is a secret, judged by its last word.

    ``DB_PASSWORD``/``dbPassword``/``db-password`` hold a password; ``GITHUB_TOKEN``, ``client_secret``,
    ``x-api-key`` and every upper-case ``*_KEY`` another strong secret; a bare or unqualified ``key``,
    ``signature`` or ``auth`` only maybe (the value must look random). ``token_count``, ``password_field``,
    ``page_token`` and ``sort_key`` hold none.
    """
    bare = name.strip("\"'`\\$@-_.: ")
    segments = [s.lower() for s in _SEGMENTS.findall(bare)]
    if not segments:
        return None
    last, before = segments[-1], segments[-2] if len(segments) > 1 else ""
    if before in _NOT_SECRET_QUALIFIERS or last in _NOT_SECRET_QUALIFIERS:
        return None
    if last in _PASSWORD_WORDS or (len(segments) == 1 and last.endswith(("password", "passwd"))):
        return "password"
    if len(segments) == 1 and last.endswith("pass") and last not in _NOT_PASSWORDS:
        return "password"  # storepass, keypass, requirepass, dbpass
    if last in _STRONG_WORDS or (len(segments) == 1 and last.endswith(("token", "secret"))):
        return "strong"
    if last == "base" and before == "key":
        return "strong"  # Rails' secret_key_base
    if last in {"key", "keys"}:
        if before in _KEY_QUALIFIERS or (bare.isupper() and len(segments) > 1):
            return "strong"
        return "weak" if last == "key" else None
    if len(segments) == 1 and last.endswith("key") and last[:-3] in _KEY_QUALIFIERS:
        return "strong"
    if last in _WEAK_WORDS:
        return "strong" if bare.isupper() and len(segments) > 1 else "weak"
    return None


def token_like(value: str) -> bool:
    """A value that looks generated rather than written: letters with digits, mixed case, or long and random."""
    if len(value) < 8 or value.lower() in _STOPWORDS or _REFERENCE.match(value):
        return False
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    if has_digit and has_alpha:
        return True
    if _WORDS.fullmatch(value):
        return False  # ``ProductUserVisibleVersion``, ``maxRetryCount``: words run together, a name
    inner_upper = any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)
    # Mixed case without digits: random only when long (``PaymentApiKey`` is a name, not a key).
    return len(value) >= 20 and entropy(value) >= (3.5 if inner_upper else 3.8)


def _has_digit_and_letter(value: str) -> bool:
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def is_reference(value: str) -> bool:
    """Code or a template that names a secret kept elsewhere (``$TOKEN``, ``os.environ[...]``, ``<key>``)."""
    return bool(_REFERENCE.match(value)) or value.lower() in _CODE_WORDS


def _trimmed(match: re.Match[str], quoted: bool = False) -> Span | None:
    start, end = match.span("secret")
    value = match.group("secret")
    if not quoted:
        stripped = value.rstrip(_TRAILING)
        end -= len(value) - len(stripped)
    return (start, end) if end > start else None


def _group(match: re.Match[str], name: str) -> str:
    return match.groupdict().get(name) or ""


def check_not_reference(match: re.Match[str]) -> Span | None:
    value = match.group("secret")
    return None if not value or is_reference(value) else match.span("secret")


def check_token_like(match: re.Match[str]) -> Span | None:
    return _trimmed(match) if token_like(match.group("secret")) else None


def check_header_value(match: re.Match[str]) -> Span | None:
    """``Authorization: <scheme> <credentials>`` of any scheme; prose about authorization is left alone."""
    value = match.group("secret")
    if is_reference(value) or value.lower() in _STOPWORDS:
        return None
    if _CALL_OR_ATTRIBUTE.match(value) and ("." in value or "(" in value or "[" in value):
        return None  # ``authorization = self.headers.get(...)`` is code
    if "=" in value or token_like(value) or (len(value) >= 6 and any(not c.isalpha() for c in value)):
        return _trimmed(match, quoted="=" in value)
    return None


def check_user_password(match: re.Match[str]) -> Span | None:
    """``curl -u user:pass``, ``smbclient -U user%pass``; ``docker run -u 1000:1000`` is a uid, not a login."""
    user, value = match.group("user"), match.group("secret")
    if (user.isdigit() and value.isdigit()) or is_reference(value) or user.startswith("$"):
        return None
    return match.span("secret")


def check_flag(match: re.Match[str]) -> Span | None:
    """``--password x``, ``--api-key x``, ``-pass pass:x``; ``--key server.key`` needs a random-looking value."""
    kind = name_class(match.group("name").lstrip("-"))
    value = match.group("secret")
    if kind is None or not value or value.startswith("-") or is_reference(value):
        return None
    if kind == "weak" and not token_like(value):
        return None
    return match.span("secret")


def check_assignment(match: re.Match[str]) -> Span | None:
    """``NAME = value`` in env, shell, YAML, JSON, TOML, ini, XML, query strings and connection strings."""
    name = match.group("name")
    kind = name_class(name)
    value = match.group("secret")
    probe = value.strip().rstrip(_TRAILING)
    if kind is None or not probe or is_reference(probe) or _TEMPLATE.search(value):
        return None
    if _OPENCLAW_SESSION_KEY.match(probe.strip("\"'`")):
        return None
    sep = _group(match, "sep").lower()
    colon = sep in (":", "->", "is", "was", "are")  # YAML or a sentence: the value may be a word
    quoted = bool(_group(match, "q")) or "sep" not in match.groupdict()
    if _code_around(match, name, value, quoted, sep):
        return None
    if kind != "password" and (len(value) < 6 or _DOTTED_NUMBER.match(value) or _DOTTED_WORDS.match(value)):
        return None  # ``token=EOF``, ``SERVER_AUTH = '1.3.6.1'``, ``'Cookie': 'http.cookies'``
    if kind == "password" and colon and not quoted:
        if value.lower() in _STOPWORDS:
            return None  # ``- password:     The password for the authentication.``
        if name.lower() in ("pass", "pwd", "pw") and not _has_digit_and_letter(value) and not token_like(value):
            return None  # "First pass: determine the length"
    if kind == "weak" and not token_like(value):
        return None
    if kind == "strong" and colon and not quoted and not token_like(value):
        return None
    # After ``=`` the value runs to the end of the word, punctuation included (``PASSWORD=Tr0ub4dor!``);
    # after ``:`` or "is" it may be prose (``password: hunter2.``).
    return _trimmed(match, quoted or not colon)


def _code_around(match: re.Match[str], name: str, value: str, quoted: bool, sep: str) -> bool:
    """The assignment is code, not configuration: it passes a variable on, compares, or builds a string."""
    if name.startswith("$") and sep not in ("=", ":="):
        return True  # ``$PWD:/app`` reads a shell variable, it does not set one
    if value.strip().lower() == name.strip("\"'`\\$@").lower():
        return True  # ``password=password``: a keyword argument passed on
    if value.isdigit() and len(value) <= 5:
        return True  # ``ERRORTOKEN = 60``, ``cookie == 0``: a constant, not a secret
    if _HEX_LITERAL.match(value):
        return True  # ``_DD_SIGNATURE = 0x08074b50``
    before = match.string[match.start("name") - 1 : match.start("name")]
    closing = sep == ":" and not _group(match, "nq") and _group(match, "q").endswith(before)
    if closing and before in ("'", '"', "`"):
        return True  # ``prompt='Password: '``: the quote after the colon closes the string it opened
    if quoted and value[:1].isspace() and value.lstrip()[:1] in ("+", "%", ".", ",", ")"):
        return True  # ``"Token: " + repr(t)``: the quote closed a string, the rest is code
    return not quoted and _looks_like_code(value, match)


def _looks_like_code(value: str, match: re.Match[str]) -> bool:
    """``token = tokenizer(text)``, ``key = self.key``, ``password = user_password``, ``token = line[a:b]``,
    ``userid = passwd = acct = ''``, ``token = result``: a reference in code."""
    if _CALL_OR_ATTRIBUTE.match(value) and ("." in value or "(" in value or "[" in value):
        return True
    if not _IDENTIFIER.match(value):
        return False
    after = match.string[match.end("secret") : match.end("secret") + 4].lstrip(" \t")
    if after[:1] in ("(", "[", "=", "+", ","):
        return True
    if "_" in value and _SECRET_WORD.search(value):
        return True  # ``RC2_KEY = rc2_key_st``, ``password = user_password``
    prefix = match.string[match.start() : match.start("secret")].rstrip(" \t")
    spaced = prefix.endswith("=") and len(prefix) < match.start("secret") - match.start()
    return spaced and not any(c.isdigit() for c in value)  # ``self.token = nextchar``: a variable


def check_prose_password(match: re.Match[str]) -> Span | None:
    """ "the wifi password is hunter2": after "password is" any word is the password, unless it is prose.
    A quoted value goes whole, spaces and all; a passphrase runs to the end of its clause."""
    password_word = match.group("name").lower().startswith(("pass", "mot", "contra", "senha", "wacht", "пар"))
    if password_word and _group(match, "q") and match.group("sep").strip() and match.group("secret").strip():
        return match.span("secret")
    if match.group("name").lower().startswith("passphrase") and match.group("sep").strip():
        start = match.start("secret")
        clause = re.match(r"[^\n.;!?,]+", match.string[start:])
        return (start, start + clause.end()) if clause else None
    value = match.group("secret").rstrip(_TRAILING)
    if not value or value.lower() in _STOPWORDS or is_reference(value) or value[0] in "([{<":
        return None
    if not any(c.isalnum() for c in value):
        return None
    name = match.group("name").lower()
    if not name.startswith(("pass", "pwd", "mot", "contra", "senha", "wacht", "пар")) and not any(
        c.isdigit() for c in value
    ):
        return None  # a PIN or a door code has digits: "the pin is on the map" is prose
    sep = match.group("sep").strip().lower()
    digits = value.isdigit() and len(value) >= 4 and not name.startswith("password")
    looks_set = token_like(value) or digits or (len(value) >= 6 and _has_digit_and_letter(value))
    if sep in ("", "to", "-") and _SNAKE.match(value):
        return None  # "pass force_zip64 to use": an identifier, not a password
    if (sep in ("", "to", "-") or name in ("pass", "pwd", "pw")) and not looks_set:
        return None  # "password manager", "the password to continue": no value was given
    if _CALL_OR_ATTRIBUTE.match(value) and ("." in value or "(" in value):
        return None  # ``password = getpass.getpass()`` is code
    if value.lower() == name or (sep == "=" and _looks_like_code(value, match)):
        return None  # ``pwd=pwd``, ``passwd = acct = ''``
    return _trimmed(match)


# Words for a password, a PIN or a code in the languages beyond English (``secret_rules.toml``'s ``password``
# rules for them): the class decides what value may follow. See docs/decisions/0320-redaction-beyond-english.md.
_PIN_WORDS = re.compile(r"(?i)pin|пин|код|geheimzahl|code|código|codigo|暗証|验证|驗證|認証|인증|핀|الرقم|التحقق")
_NON_LATIN = re.compile(r"[^\x00-\u024f]")
# A Latin word that follows a password word in ordinary sentences of these languages without being one.
_FOREIGN_PROSE = frozenset(
    [
        "wifi",
        "wi-fi",
        "wlan",
        "email",
        "e-mail",
        "mail",
        "app",
        "apple",
        "google",
        "icloud",
        "qq",
        "wechat",
        "http",
        "https",
        "ok",
        "pin",
        "id",
        "none",
        "null",
    ]
)


def _looks_given(value: str) -> bool:
    """A value someone set rather than a word of the sentence: digits, symbols or inner capitals."""
    has_symbol = any(not c.isalnum() for c in value)
    inner_upper = any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)
    return any(c.isdigit() for c in value) or has_symbol or inner_upper or token_like(value)


def check_prose_password_intl(match: re.Match[str]) -> Span | None:
    """ "wifi密码是Tr0ub4dor-77", "パスワードはTr0ub4dor-77です", "пароль от вайфая Tr0ub4dor-77", "la contraseña
    del wifi es Tr0ub4dor-77": the value after a password or PIN word and a copula or colon.

    A value in quotes goes whole. Otherwise a PIN or code needs digits; a password given in a sentence in a
    Latin-script language must look set (digits, symbols, inner capitals: "das Passwort ist falsch" is
    prose); after a word in another script, a Latin value of four or more characters is the password
    ("пароль: qwerty", "密码是admin"), as no word of the sentence is written that way.
    """
    name = match.group("name")
    if _group(match, "q") and match.group("secret").strip():
        return match.span("secret")
    value = match.group("secret").rstrip(_TRAILING + "。，、！？）」』")
    if len(value) < 3 or is_reference(value) or value.lower() in _STOPWORDS or value.lower() in _FOREIGN_PROSE:
        return None
    if not any(c.isalnum() for c in value) or (_CALL_OR_ATTRIBUTE.match(value) and "(" in value):
        return None
    if name.lower().startswith("clave") and value.isdigit():
        return None  # "el año clave es 2024": "clave" is also "key" as in "crucial"
    if _PIN_WORDS.search(name):
        if sum(c.isdigit() for c in value) < 4 and not _has_digit_and_letter(value):
            return None
    elif not _looks_given(value) and not (_NON_LATIN.search(name) and value.isascii() and len(value) >= 4):
        return None
    start = match.start("secret")
    return start, start + len(value)


_NOT_TOKEN = re.compile(
    r"^(?:\d{4}-\d{2}-\d{2}|v?\d+(?:\.\d+)+|\d+(?:\.\d+){3}|[a-z0-9\-]+(?:\.[a-z0-9\-]+)+$|[a-z]+(?:_[a-z0-9]+)+$)"
)


def check_prose_token(match: re.Match[str]) -> Span | None:
    """ "here is my api key 9f8a...": a random-looking value near key/token/secret; dates, versions, hosts,
    paths and ``name=value`` pairs are not one."""
    value = match.group("secret")
    if "://" in value or _NOT_TOKEN.match(value) or ("/" in value and "." in value):
        return None
    if "=" in value.rstrip("="):
        return None
    return _trimmed(match)


CHECKS: dict[str, Check] = {
    "not_reference": check_not_reference,
    "token_like": check_token_like,
    "header_value": check_header_value,
    "user_password": check_user_password,
    "flag": check_flag,
    "assignment": check_assignment,
    "prose_password": check_prose_password,
    "prose_token": check_prose_token,
    "prose_password_intl": check_prose_password_intl,
}
