"""Remove secrets from text before it is shown or written anywhere."""

from __future__ import annotations

import re

_PATTERNS = [
    # password="secret" / password='secret' inside sasl.jaas.config
    re.compile(r'(?i)(password\s*=\s*)"[^"]*"'),
    re.compile(r"(?i)(password\s*=\s*)'[^']*'"),
    # key=value properties whose key names a secret
    re.compile(r"(?im)^(\s*[\w.\-]*(?:password|secret|sasl\.jaas\.config)[\w.\-]*\s*[=:]\s*)(\S.*)$"),
    # librdkafka-style dict reprs: 'sasl.password': 'x'
    re.compile(r"(?i)('[\w.]*(?:password|secret)[\w.]*'\s*:\s*)'[^']*'"),
]

_extra_secrets: set[str] = set()


def register_secret(value: str | None) -> None:
    """Remember a secret value so that it is masked wherever it appears."""
    if value and len(value) >= 3:
        _extra_secrets.add(value)


def redact(text: str) -> str:
    for secret in sorted(_extra_secrets, key=len, reverse=True):
        text = text.replace(secret, "******")
    for pat in _PATTERNS:
        if pat.groups == 2:
            text = pat.sub(lambda m: m.group(1) + "******", text)
        else:
            text = pat.sub(lambda m: m.group(1) + '"******"', text)
    return text
