"""Files a user gives kops: read them, parse JSON and YAML, check where output goes.

Reading names the input and the reason for every way a file can be wrong: missing, a
directory or a device, unreadable, larger than kops reads, not UTF-8 (with the line and column
of the first bad byte), empty, invalid JSON or YAML (``file:line:column``). JSON is read as
Kafka's tools read it: ``NaN`` / ``Infinity`` and numbers no Kafka field can hold do not become
Python floats or 5000-digit ints; they come back as :class:`NotANumber` values, which no
checker takes, so the document's checks name them with their JSON path.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kops.errors import BadInput
from kops.inputs import guarded

#: the largest file kops reads (a plan for millions of replicas is a few hundred MB)
MAX_FILE_BYTES = 1 << 30


def _describe(path: str) -> str:
    return repr(path) if not path.isprintable() or " " in path or not path else path


def read_bytes(path: str, *, what: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The content of the file ``path`` (``what`` names the input: ``--topology``)."""
    name = _describe(str(path))
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise BadInput(f"{what} {name}: is a directory, not a file")
        if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
            raise BadInput(f"{what} {name}: is a device, not a file")
        if stat.S_ISREG(st.st_mode) and st.st_size > limit:
            raise BadInput(f"{what} {name}: {st.st_size} bytes, more than kops reads ({limit})")
        with open(path, "rb") as f:  # also a pipe: <(command) in a shell
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise BadInput(f"{what} {name}: does not exist") from None
    except PermissionError:
        raise BadInput(f"{what} {name}: permission denied") from None
    except OSError as e:
        raise BadInput(f"{what} {name}: cannot read: {e.strerror or e}") from None
    except ValueError as e:  # e.g. a NUL byte in the path
        raise BadInput(f"{what} {name}: not a usable path ({e})") from None
    if len(data) > limit:
        raise BadInput(f"{what} {name}: more than {limit} bytes, more than kops reads")
    return data


def decode(data: bytes, *, source: str) -> str:
    """UTF-8 text (a leading byte order mark is dropped); a bad byte is named by its line and
    column."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise BadInput(f"{source}:{line}:{col}: not UTF-8 text (byte 0x{data[e.start]:02x}); "
                       "save the file as UTF-8") from None
    return text[1:] if text.startswith("\ufeff") else text


def read_text(path: str, *, what: str, limit: int = MAX_FILE_BYTES) -> str:
    return decode(read_bytes(path, what=what, limit=limit), source=f"{what} {_describe(str(path))}")


# -- JSON ------------------------------------------------------------------------------------
class NotANumber:
    """A JSON number kops cannot take: ``NaN``, ``Infinity``, ``1e400``, or an integer with more
    digits than any Kafka field holds. Neither an int nor a float nor a string: every check
    refuses it, naming it as it was written."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text if len(text) <= 24 else f"{text[:12]}... ({len(text)} characters)"

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__


def _json_int(text: str) -> Any:
    return int(text) if len(text) <= 40 else NotANumber(text)


def _json_float(text: str) -> Any:
    value = float(text)
    return value if value not in (float("inf"), float("-inf")) else NotANumber(text)


@guarded
def parse_json(text: str, *, source: str) -> Any:
    """JSON ``text`` (``source`` names it in messages: ``--topology snap.json``)."""
    import json

    if not text.strip():
        raise BadInput(f"{source}: the file is empty (expected JSON)")
    try:
        return json.loads(text, parse_int=_json_int, parse_float=_json_float, parse_constant=NotANumber)
    except json.JSONDecodeError as e:
        raise BadInput(f"{source}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from None
    except RecursionError:
        raise BadInput(f"{source}: not valid JSON: nested too deeply") from None
    except ValueError as e:  # pragma: no cover - the hooks above take what json.loads hands them
        raise BadInput(f"{source}: not valid JSON: {e}") from None


def read_json(path: str, *, what: str, limit: int = MAX_FILE_BYTES) -> Any:
    source = f"{what} {_describe(str(path))}"
    return parse_json(decode(read_bytes(path, what=what, limit=limit), source=source), source=source)


def json_path(*parts: Any) -> str:
    """``partitions[3].replicas`` from ``("partitions", 3, "replicas")``."""
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


# -- YAML ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class YamlDocument:
    """A YAML file: its text, the data, and the node tree (for line numbers)."""

    text: str
    data: Any
    root: Any


@guarded
def parse_yaml(text: str, *, source: str) -> YamlDocument:
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        why = " ".join(str(x) for x in (getattr(e, "context", None), getattr(e, "problem", None)) if x) or str(e)
        raise BadInput(f"{source}{where}: not valid YAML: {why}") from None
    except RecursionError:
        raise BadInput(f"{source}: not valid YAML: nested too deeply") from None
    except (ValueError, TypeError, OverflowError) as e:  # a scalar YAML cannot build (a 5000-digit int)
        raise BadInput(f"{source}: not valid YAML: {e}") from None
    return YamlDocument(text, data, root)


def read_yaml(path: str, *, what: str, limit: int = 16 << 20) -> YamlDocument:
    source = f"{what} {_describe(str(path))}"
    text = decode(read_bytes(path, what=what, limit=limit), source=source)
    if not text.strip():
        raise BadInput(f"{source}: the file is empty")
    return parse_yaml(text, source=source)


# -- output ----------------------------------------------------------------------------------
#: image formats kops draws charts in (matplotlib's Agg, SVG and PDF back ends)
CHART_FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}


def output_file(path: str, *, what: str, formats: Mapping[str, str] | None = None,
                create_parents: bool = False) -> str | None:
    """Check a file kops is about to write, before any work: not a directory, in a directory
    that exists (or can be created, with ``create_parents``) and is writable; with ``formats``
    (extension -> format), its extension names one of them. Returns the format (or None)."""
    name = _describe(str(path))
    if not path:
        raise BadInput(f"{what}: an empty path")
    if "\x00" in path:
        raise BadInput(f"{what} {name}: not a usable path (a NUL byte)")
    if os.path.isdir(path) or path.endswith(os.sep):
        raise BadInput(f"{what} {name}: is a directory; give a file name"
                       + (f" ending in {', '.join(formats)}" if formats else ""))
    fmt = None
    if formats is not None:
        ext = os.path.splitext(path)[1].lower()
        fmt = formats.get(ext)
        if fmt is None:
            raise BadInput(f"{what} {name}: kops writes {', '.join(formats)} files; "
                           + (f"not {ext!r}" if ext else "name the format with the file's extension"))
    _writable_dir(os.path.dirname(os.path.abspath(path)), what=what, name=name, create=create_parents)
    return fmt


def output_dir(path: str, *, what: str) -> None:
    """Check a directory kops is about to write into (it may not exist yet): not a file, and
    its nearest existing parent is a writable directory."""
    name = _describe(str(path))
    if not path:
        raise BadInput(f"{what}: an empty path")
    if "\x00" in path:
        raise BadInput(f"{what} {name}: not a usable path (a NUL byte)")
    if os.path.exists(path) and not os.path.isdir(path):
        raise BadInput(f"{what} {name}: is a file, not a directory")
    _writable_dir(os.path.abspath(path), what=what, name=name, create=True)


def _writable_dir(d: str, *, what: str, name: str, create: bool) -> None:
    probe = d
    while not os.path.exists(probe):
        if not create:
            raise BadInput(f"{what} {name}: directory {_describe(d)} does not exist")
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        raise BadInput(f"{what} {name}: {_describe(probe)} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise BadInput(f"{what} {name}: directory {_describe(probe)} is not writable")
