"""`accel-images kb update`: write what `kb check` found into the knowledge base's files.

The files are edited, not regenerated: ruamel.yaml's round-trip mode keeps every comment, the
order of keys, quoting and flow style, so a reviewer's diff holds only the new rows. Each row it
writes names its source and evidence grade in a comment. What the sources cannot say is never
guessed: a new torch row gets `python: []` with `unverified: [python]` (the wheel tags it saw
are noted next to it), a new build goes under the vendor's `unverified:` (not `builds:`), and
`compat` answers "unverified" for both until a person fills them in. Disappearances (a build
gone from its index, a base tag gone from its registry) are reported, never deleted: what
replaces them is a person's call.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accel_images.errors import InputError
from accel_images.kb.check import Finding, KbFiles, Report
from accel_images.versions import parse

WRITES = ("new-release", "new-patch", "yanked", "companion", "new-variant")
"""The findings `kb update` writes; the others are left for a person (see the module docstring)."""


@dataclass(frozen=True)
class Change:
    """One edit, as `kb update` reports it."""

    file: str
    what: str


def _yaml() -> Any:
    from ruamel.yaml import YAML
    yaml = YAML()  # round-trip
    yaml.preserve_quotes = True
    yaml.width = 4096          # never re-wrap a long flow mapping (the os rows)
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def _flow(values: Iterable[str], quote: str = '"') -> Any:
    from ruamel.yaml.comments import CommentedSeq
    from ruamel.yaml.scalarstring import (
        DoubleQuotedScalarString,
        SingleQuotedScalarString,
    )
    kind = DoubleQuotedScalarString if quote == '"' else SingleQuotedScalarString
    seq = CommentedSeq([kind(v) for v in values])
    seq.fa.set_flow_style()
    return seq


def _flow_map(values: dict[str, str]) -> Any:
    from ruamel.yaml.comments import CommentedMap
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString
    mapping = CommentedMap((k, DoubleQuotedScalarString(v)) for k, v in values.items())
    mapping.fa.set_flow_style()
    return mapping


def _q(text: str) -> Any:
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString
    return DoubleQuotedScalarString(text)


class _File:
    """One knowledge-base file, loaded for a round trip."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.yaml = _yaml()
        self.text = path.read_text(encoding="utf-8")
        try:
            self.data = self.yaml.load(self.text)
        except Exception as err:  # noqa: BLE001 - ruamel's errors carry the position
            mark = getattr(err, "problem_mark", None)
            raise InputError(f"not valid YAML: {getattr(err, 'problem', err)}", file=str(path),
                             line=mark.line + 1 if mark else None) from None

    def dump(self) -> str:
        out = io.StringIO()
        self.yaml.dump(self.data, out)
        return out.getvalue()


def apply(report: Report, files: KbFiles, today: str) -> list[Change]:
    """Write the report's findings into `files` (in place) and return what changed.

    Refuses (SourceUnreachable's exit code, through InputError's one line) when a source could
    not be read: a partial check cannot tell "gone" from "not asked", so nothing is written."""
    if report.unreachable:
        raise report.unreachable[0]
    kb_file = _File(files.kb_yaml)
    vendor_files: dict[str, _File] = {}
    changes: list[Change] = []
    for finding in report.findings:
        if finding.kind not in WRITES:
            continue
        if finding.kind == "new-variant":
            name = str(finding.facts["vendor"])
            if name not in vendor_files:
                vendor_files[name] = _File(files.root / finding.file)
            changes += _new_variant(vendor_files[name], finding, today)
        else:
            changes += _torch_change(kb_file, finding, today)
    if changes and "as_of" in kb_file.data:
        kb_file.data["as_of"] = _q(today)
        changes.append(Change(kb_file.path.name, f"as_of: {today}"))
    for edited in (kb_file, *vendor_files.values()):
        text = edited.dump()
        if text != edited.text:
            edited.path.write_text(text, encoding="utf-8")
    return changes


# ---- kb.yaml: torch rows --------------------------------------------------------------------

def _torch_change(file: _File, finding: Finding, today: str) -> list[Change]:
    torch = file.data["torch"]
    facts = finding.facts
    minor = str(facts["minor"])
    where = file.path.name
    if finding.kind == "new-release":
        if minor in torch:
            return []
        _insert_release(torch, finding, today)
        return [Change(where, f"torch {minor}: new row ({', '.join(facts['versions'])}); to fill: "
                              f"{', '.join(finding.to_fill)}")]
    row = torch.get(minor)
    if row is None:
        return []
    if finding.kind == "new-patch":
        version = str(facts["version"])
        versions = row["versions"]
        if version in [str(v) for v in versions]:
            return []
        position = next((i for i, v in enumerate(versions) if parse(str(v)) > parse(version)), len(versions))
        versions.insert(position, _q(version))
        _note(row, "versions", f"{version}: the package index, uploaded {facts['uploaded']} ({finding.evidence})")
        return [Change(where, f"torch {minor}: versions += {version}")]
    if finding.kind == "yanked":
        version = str(facts["version"])
        versions = row["versions"]
        if len(versions) < 2 or version not in [str(v) for v in versions]:
            return []   # a row keeps one version: a person decides what a fully yanked line means
        del versions[[str(v) for v in versions].index(version)]
        _note(row, "versions", f"{version} yanked on the package index ({facts.get('reason') or 'no reason given'})")
        return [Change(where, f"torch {minor}: versions -= {version} (yanked)")]
    if finding.kind == "companion":
        from ruamel.yaml.comments import CommentedMap
        companions = row.get("companions")
        if companions is None:
            companions = CommentedMap()
            companions.fa.set_flow_style()
            row.insert(len(row) - 1 if "source" in row else len(row), "companions", companions)
        companions[str(facts["package"])] = _q(str(facts["line"]))
        return [Change(where, f"torch {minor}: companions {facts['package']} {facts['line']}")]
    return []


def _note(mapping: Any, key: str, text: str) -> None:
    """An end-of-line comment on `key`, after the one it has."""
    comments = mapping.ca.items.get(key)
    old = comments[2].value.strip().lstrip("#").strip() if comments and len(comments) > 2 and comments[2] else ""
    if comments and len(comments) > 2 and comments[2]:
        comments[2] = None
    mapping.yaml_add_eol_comment(f"# {old}; {text}" if old else f"# {text}", key)


def _insert_release(torch: Any, finding: Finding, today: str) -> None:
    from ruamel.yaml.comments import CommentedMap
    facts = finding.facts
    minor = str(facts["minor"])
    row = CommentedMap()
    row["released"] = _q(str(facts["released"]))
    row["versions"] = _flow(facts["versions"])
    row["python"] = _flow([], "'")
    written = ["released", "versions"]
    if facts.get("glibc_min"):
        row["glibc_min"] = _q(str(facts["glibc_min"]))
        written.append(f"glibc_min (the manylinux_{str(facts['glibc_min']).replace('.', '_')}_x86_64 wheel tag)")
    if facts.get("companions"):
        row["companions"] = _flow_map({str(k): str(v) for k, v in facts["companions"].items()})
        written.append(f"companions (uploaded the same day as {facts['versions'][0]})")
    row["unverified"] = _flow(finding.to_fill, "'")
    row["evidence"] = finding.evidence
    row["source"] = finding.source
    keys = [str(k) for k in torch]
    position = next((i for i, k in enumerate(keys) if parse(k) > parse(minor)), len(keys))
    if position == len(keys) and keys:
        _move_trailing_comment(torch[keys[-1]], row)
    torch.insert(position, _q(minor), row)
    wheels = ", ".join(facts.get("wheel_pythons") or []) or "none"
    note = (f"{minor}: written by `accel-images kb update` on {today} from the package index ({finding.evidence}):"
            f" {', '.join(written)}. Fill what `unverified` lists, then delete that key (python: RELEASE.md;"
            f" the package index has wheels for {wheels},"
            f" requires_python {facts.get('requires_python') or 'unstated'}).")
    torch.yaml_set_comment_before_after_key(_q(minor), before="\n".join(_wrap(note, 96)), indent=2)


def _wrap(text: str, width: int) -> list[str]:
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def _move_trailing_comment(previous: Any, row: Any) -> None:
    """The comment block after the last row (the next section's heading) belongs after the new one."""
    from ruamel.yaml.tokens import CommentToken
    while hasattr(previous, "ca") and len(previous) and not previous.ca.items.get(list(previous)[-1]):
        last = list(previous)[-1]
        if not hasattr(previous[last], "ca"):
            return
        previous = previous[last]
    if not hasattr(previous, "ca") or not len(previous):
        return
    last = list(previous)[-1]
    item = previous.ca.items.get(last)
    if not item or len(item) < 3 or item[2] is None:
        return
    token = item[2]
    eol, newline, rest = token.value.partition("\n")
    if not rest.strip():
        return
    item[2] = CommentToken(eol + newline, token.start_mark, None) if eol.strip() else None
    if item[2] is None and not any(item):
        del previous.ca.items[last]
    row.ca.items[list(row)[-1]] = [None, None, CommentToken("\n" + rest, token.start_mark, None), None]


# ---- vendors/<vendor>.yaml: builds ------------------------------------------------------------

def _new_variant(file: _File, finding: Finding, today: str) -> list[Change]:
    from ruamel.yaml.comments import CommentedMap
    data = file.data
    facts = finding.facts
    minor, stack = str(facts["minor"]), facts.get("stack")
    pending = data.get("unverified")
    if pending is None:
        pending = CommentedMap()
        keys = list(data)
        position = keys.index("builds") + 1 if "builds" in keys else len(keys)
        data.insert(position, "unverified", pending)
    current = pending.get(minor)
    if current == "*":
        return []
    note = (f"# kb update {today}: {facts['wheel']} on the {facts['index']} index ({finding.evidence});"
            + (f" to fill: {', '.join(finding.to_fill)}, then" if finding.to_fill else " confirm, then")
            + " move to builds")
    if stack is None:
        pending[_q(minor)] = _q("*")
    else:
        if current is None:
            current = pending[_q(minor)] = _flow([])
        if str(stack) in [str(s) for s in current]:
            return []
        current.append(_q(str(stack)))
    _note(pending, minor, note.lstrip("# "))
    return [Change(f"vendors/{file.path.name}", f"torch {minor}: unverified {facts['vendor']} {stack or '*'}")]


__all__ = ["WRITES", "Change", "apply"]
