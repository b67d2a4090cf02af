"""Regexes that Spark runs (``rlike``, ``regexp_extract``), checked by Java's own rules before
Spark starts.

Python's ``re`` and ``java.util.regex`` disagree: ``a{`` and ``(?P<n>x)`` are fine in Python and
errors in Java (a long Java stack trace once Spark's job runs, half a minute later), ``\\p{L}``
the other way round. So the JVM judges: a small checker class, compiled once into kops' cache
directory, compiles each pattern with ``Pattern.compile`` and reports the error (or the number
of capturing groups) — about 0.1 s. Without a JDK (no ``javac``), a conservative check refuses
the constructs Java rejects that Python accepts.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kops.errors import BadInput

_SOURCE = r"""
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

public class KopsRegexCheck {
    public static void main(String[] args) {
        for (String hex : args) {
            String regex = new String(HexFormat.of().parseHex(hex), StandardCharsets.UTF_8);
            try {
                System.out.println("ok " + Pattern.compile(regex).matcher("").groupCount());
            } catch (PatternSyntaxException e) {
                String why = e.getDescription().replace('\n', ' ');
                System.out.println("error " + e.getIndex() + " " + why);
            } catch (RuntimeException | StackOverflowError e) {
                System.out.println("error -1 " + e.getClass().getSimpleName());
            }
        }
    }
}
"""
_CLASS = "KopsRegexCheck"


@dataclass(frozen=True)
class Verdict:
    ok: bool
    groups: int = 0
    index: int = -1
    reason: str = ""


def _java_tool(name: str) -> str | None:
    home = os.environ.get("JAVA_HOME")  # as PySpark finds Java
    if home and os.access(os.path.join(home, "bin", name), os.X_OK):
        return os.path.join(home, "bin", name)
    return shutil.which(name)


def _checker_dir() -> Path | None:
    """Where the compiled checker is (compiled on first use); None without a JDK."""
    from kops.paths import cache_root  # the one kops cache directory

    javac = _java_tool("javac")
    if javac is None:
        return None
    d = cache_root() / "regex-check" / hashlib.sha256(_SOURCE.encode()).hexdigest()[:12]
    if (d / f"{_CLASS}.class").is_file():
        return d
    tmp = d.with_name(f"{d.name}.{os.getpid()}.tmp")
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / f"{_CLASS}.java").write_text(_SOURCE)
        r = subprocess.run([javac, "-d", str(tmp), str(tmp / f"{_CLASS}.java")], capture_output=True,
                           timeout=120)
        if r.returncode != 0:
            return None
        try:
            os.replace(tmp, d)
        except OSError:  # another kops compiled it meanwhile
            shutil.rmtree(tmp, ignore_errors=True)
        return d if (d / f"{_CLASS}.class").is_file() else None
    except (OSError, subprocess.SubprocessError):
        shutil.rmtree(tmp, ignore_errors=True)
        return None


def java_verdicts(patterns: list[str]) -> list[Verdict] | None:
    """Java's verdict on each pattern; None when no JVM can be asked."""
    java = _java_tool("java")
    d = _checker_dir() if java else None
    if java is None or d is None:
        return None
    args = [p.encode("utf-8").hex() for p in patterns]
    try:
        r = subprocess.run([java, "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss8m",
                            "-cp", str(d), _CLASS, *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = r.stdout.splitlines()
    if r.returncode != 0 or len(lines) != len(patterns):
        return None
    out = []
    for line in lines:
        kind, _, rest = line.partition(" ")
        if kind == "ok":
            out.append(Verdict(True, groups=int(rest)))
        else:
            index, _, reason = rest.partition(" ")
            out.append(Verdict(False, index=int(index), reason=reason))
    return out


#: constructs Python's re takes and Java refuses (for the check without a JDK)
_PYTHON_ONLY = [
    (re.compile(r"\(\?P[<=>]"), "Python's named-group syntax (?P...); Java writes (?<name>...) and \\k<name>"),
    (re.compile(r"\(\?#"), "a (?#...) comment"),
    (re.compile(r"\(\?\("), "a conditional group (?(...)...)"),
    (re.compile(r"\\N\{"), "\\N{...}: write the character itself"),
]
_QUANTIFIER = re.compile(r"\{\d+(,\d*)?\}")


def _approximate(pattern: str) -> Verdict:
    """Without a JVM: Python's re must compile it, and no construct only Python knows."""
    for rx, what in _PYTHON_ONLY:
        m = rx.search(pattern)
        if m:
            return Verdict(False, index=m.start(), reason=f"{what} is not Java regex syntax")
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
        elif c == "]" and in_class:
            in_class = False
        elif c == "{" and not in_class and not _QUANTIFIER.match(pattern, i):
            return Verdict(False, index=i, reason="Illegal repetition ('{' that starts no {n,m} quantifier: write \\{)")
        i += 1
    try:
        compiled = re.compile(pattern)
    except re.error as e:
        return Verdict(False, index=e.pos if e.pos is not None else -1, reason=str(e.msg))
    except (RecursionError, OverflowError) as e:
        return Verdict(False, reason=type(e).__name__)
    return Verdict(True, groups=compiled.groups)


def check(patterns: dict[str, str], *, wrap: dict[str, str] | None = None, groups: dict[str, int] | None = None) -> None:
    """Refuse (exit 2) every pattern Java would refuse. ``patterns``: option -> regex; ``wrap``:
    option -> the format Spark runs it in (``^(?:{})$``), checked too; ``groups``: option -> the
    capturing groups it needs at least."""
    wrap, groups = wrap or {}, groups or {}
    names, texts = [], []
    problems = []
    for name, rx in patterns.items():
        if any(0xD800 <= ord(c) <= 0xDFFF for c in rx):
            problems.append(f"{name}: {rx!r} is not valid UTF-8 text")
            continue
        names.append(name)
        texts.append(rx)
        if name in wrap:
            names.append(name)
            texts.append(wrap[name].format(rx))
    verdicts = java_verdicts(texts) if texts else []
    if verdicts is None:
        verdicts = [_approximate(t) for t in texts]
    seen = set()
    for name, text, v in zip(names, texts, verdicts):
        if name in seen:
            continue
        if not v.ok:
            at = f" at index {v.index}" if v.index >= 0 else ""
            problems.append(f"{name}: {patterns[name]!r} is not a valid Java regex (Spark runs it): {v.reason}{at}")
            seen.add(name)
        elif v.groups < groups.get(name, 0):
            need = groups[name]
            problems.append(f"{name}: {patterns[name]!r} needs {need} capturing group{'s' if need > 1 else ''} "
                            "(around the broker id, e.g. 'broker-(\\d+)/')")
            seen.add(name)
    if problems:
        if len(problems) == 1:
            raise BadInput(problems[0])
        raise BadInput(f"{len(problems)} bad regexes", details=problems)
