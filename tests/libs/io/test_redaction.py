"""libs.io.redaction: every known secret and every keyed or URL-embedded secret value is masked, wherever it
appears; a shell expansion in a hint (`token=$(cat FILE)`) and text that only names a secret stay. The secrets are
random per test, since the registry is the process's."""
from __future__ import annotations

import secrets
from urllib.parse import quote

from blockheat.libs.io import catalog, redaction, sql_access
from blockheat.libs.io.redaction import MASK, redact


def test_keyed_and_url_embedded_values_are_masked():
    assert redact("spark connect sc://localhost:15002/;token=a1b2/c3;user_id=me warehouse=/w") == (
        f"spark connect sc://localhost:15002/;token={MASK};user_id=me warehouse=/w")
    assert redact("jdbc:postgresql://h:5432/db?user=bob&password=hunter2&ssl=true") == (
        f"jdbc:postgresql://h:5432/db?user=bob&password={MASK}&ssl=true")
    assert redact("postgresql://bob:hunter2@h:5432/db and s3a://bucket/key") == (
        f"postgresql://bob:{MASK}@h:5432/db and s3a://bucket/key")
    assert redact("--conf spark.blockheat.writeKey=k3y --conf fs.s3a.secret.key=s3cr3t, PWD=/home/u") == (
        f"--conf spark.blockheat.writeKey={MASK} --conf fs.s3a.secret.key={MASK}, PWD=/home/u")
    kept = ('clients set BLOCKHEAT_SPARK_REMOTE="sc://localhost:15002/;token=$(cat /w/_serve/connect-token)"; '
            "token required; password in /w/_serve/sql-password; WHERE token = 'x'; passwordfile=/p")
    assert redact(kept) == kept


def test_registered_secrets_are_masked_anywhere_longest_first():
    token = secrets.token_urlsafe(32)
    redaction.register(token, token[:12], "short")
    assert redact(f"x{token}y {token[:12]} short") == f"x{MASK}y {MASK} short"   # under MIN_LITERAL: kept
    assert redaction.redact_bytes(f"{token}\n".encode()) == f"{MASK}\n".encode()
    raw = b"\xff\xfe not UTF-8\n"
    assert redaction.redact_bytes(raw) is raw


def test_the_environments_secrets_include_a_token_inside_the_remote_url():
    token, key = secrets.token_urlsafe(16) + "+/=", secrets.token_hex(20)
    env = {"BLOCKHEAT_SPARK_REMOTE": f"sc://h:15002/;token={quote(token, safe='')};user_id=u",
           "AWS_SECRET_ACCESS_KEY": key, "AWS_ACCESS_KEY_ID": "AKIAEXAMPLEID", "BLOCKHEAT_WAREHOUSE": "/w"}
    assert sorted(redaction.secrets_of_environment(env)) == sorted([key, quote(token, safe=""), token])
    redaction.from_environment(env)
    assert redact(f"{token} {key} AKIAEXAMPLEID /w") == f"{MASK} {MASK} AKIAEXAMPLEID /w"


def test_secrets_read_from_their_files_are_registered(tmp_path):
    token, password = secrets.token_urlsafe(32), secrets.token_urlsafe(24)
    (tmp_path / "token").write_text(token + "\n")
    (tmp_path / "pg").write_text(password + "\n")
    for name in ("token", "pg"):
        (tmp_path / name).chmod(0o600)
    assert redact(f"{token} {password}") == f"{token} {password}"
    assert sql_access.read_secret(tmp_path / "token") == token
    assert catalog.read_password_file(tmp_path / "pg") == password
    assert redact(f"{token} {password}") == f"{MASK} {MASK}"
