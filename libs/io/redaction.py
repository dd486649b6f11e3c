"""Secrets kept out of what blockheat prints: `redact(text)` masks the secrets this process knows (register: the
servers' token and password as they are read, the metastore's password; from_environment: the Spark Connect token,
the S3 secret key and session token, the metastore password and a token in BLOCKHEAT_SPARK_REMOTE) wherever they
appear, and any value written as `token=`, `password=`, `secret.key=` ... or as a URL's `user:password@`.

The command's log handler, its stderr, the JVM's forwarded stderr and its tracebacks (jobs.cli.console, jobs.cli.main)
pass through it, so a secret never reaches the terminal or a log, whatever the message that carries it.
"""
from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from urllib.parse import unquote

MASK = "****"
#: Known secrets shorter than this are not masked as literal text (masking a 3-letter password everywhere would
#: garble the output); their `password=` form still is.
MIN_LITERAL = 6
#: Variables whose whole value is a secret.
SECRET_VARIABLES = ("SPARK_CONNECT_AUTHENTICATE_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                    "BLOCKHEAT_METASTORE_PASSWORD")
#: Variables that may carry a secret inside a URL (sc://host:port/;token=...).
URL_VARIABLES = ("BLOCKHEAT_SPARK_REMOTE",)
# `key=value` of a secret, in a URL's parameters, a setting or a command line; a value that is a shell expansion
# (`token=$(cat FILE)`, a hint the command prints) is left alone.
_KEYED = re.compile(r"(?i)((?<![A-Za-z0-9])(?:token|password|passwd|secret|secret[._-]?key|secret[._-]?access"
                    r"[._-]?key|session[._-]?token|write[._-]?key|api[._-]?key)\s*=\s*)(?![$*])([^\s;&,'\"<>)\]}]+)")
# A URL's user:password@.
_USERINFO = re.compile(r"(?<=://)([^/\s:@'\"]+):([^/\s@'\"]+)@")

_lock = threading.Lock()
_known: set[str] = set()
_literal: re.Pattern[str] | None = None


def register(*secrets: str | None) -> None:
    """Mask these values (those of at least MIN_LITERAL characters) in everything redact sees from now on."""
    global _literal
    new = {s for s in secrets if s and len(s) >= MIN_LITERAL} - _known
    if not new:
        return
    with _lock:
        _known.update(new)
        # Longest first, so a secret containing another is masked whole.
        _literal = re.compile("|".join(re.escape(s) for s in sorted(_known, key=len, reverse=True)))


def secrets_of_environment(env: Mapping[str, str]) -> list[str]:
    """The secrets of an environment: SECRET_VARIABLES' values and the keyed values inside URL_VARIABLES'."""
    found = [env.get(name, "") for name in SECRET_VARIABLES]
    for name in URL_VARIABLES:
        for match in _KEYED.finditer(env.get(name, "")):
            found += [match.group(2), unquote(match.group(2))]
    return [s for s in found if s]


def from_environment(env: Mapping[str, str] | None = None) -> None:
    """register the secrets of `env` (default: this process's environment)."""
    register(*secrets_of_environment(os.environ if env is None else env))


def redact(text: str) -> str:
    """`text` with every known secret and every keyed or URL-embedded secret value replaced by MASK."""
    literal = _literal
    if literal is not None:
        text = literal.sub(MASK, text)
    text = _KEYED.sub(lambda m: m.group(1) + MASK, text)
    return _USERINFO.sub(lambda m: f"{m.group(1)}:{MASK}@", text)


def redact_bytes(raw: bytes) -> bytes:
    """redact for a line of bytes (a child's stderr): the same bytes when it holds no secret."""
    text = raw.decode(errors="replace")
    masked = redact(text)
    return raw if masked == text else masked.encode()


__all__ = ["MASK", "MIN_LITERAL", "SECRET_VARIABLES", "URL_VARIABLES", "from_environment", "redact",
           "redact_bytes", "register", "secrets_of_environment"]
