"""The VS Code extension's TextMate grammar, run over every `.sched` file of the repository with a minimal TextMate
tokenizer (`textmate.py`): each character of each token the language's own lexer reads gets the scope meant for
that token (keywords by kind, job types, names where they are defined, numbers, strings, docstrings, comments,
operators, table cells), and names that are no keyword stay plain, whatever they contain (`forwarder`, `x_if`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from lark.exceptions import UnexpectedInput
from textmate import Grammar

from ppdsl.language import grammar_tables
from ppdsl.language.typecheck import FUNCTIONS
from ppdsl.plan.kinds import KINDS

from paths import CODEGEN, LIBRARY, ROOT, UI

EXTENSION = ROOT / "editors" / "vscode"
GRAMMAR = Grammar(json.loads((EXTENSION / "syntaxes" / "sched.tmLanguage.json").read_text(encoding="utf-8")))
FILES = sorted(LIBRARY.glob("*.sched")) + sorted(UI.glob("*.sched")) + sorted(CODEGEN.glob("*.sched"))

PLAIN = "source.sched"
DECLARATION = "storage.type.declaration.sched"
# The scope each keyword of the grammar is meant to get.
KEYWORDS = {
    **dict.fromkeys(
        "schedule include param fn require job placement partition cost comm memory rule order table let".split(),
        DECLARATION,
    ),
    **dict.fromkeys("repeat for in if elif else then".split(), "keyword.control.sched"),
    **dict.fromkeys(
        "ops before after receives sends looped vshape limit stream priority attr when allow empty".split(),
        "keyword.other.sched",
    ),
    **dict.fromkeys("and or not".split(), "keyword.operator.logical.sched"),
    **dict.fromkeys("true false".split(), "constant.language.boolean.sched"),
    **dict.fromkeys("rank stage".split(), "variable.language.sched"),
}
BUILT_IN_NAMES = {"pp", "vpp", "microbatches", "chunk"}
DEFINED = {
    "JOB": "entity.name.type.job.sched",
    "FN": "entity.name.function.sched",
    "PARAM": "variable.other.constant.sched",
    "LET": "variable.other.definition.sched",
}
BY_TYPE = {
    "INT": "constant.numeric.sched",
    "DECIMAL": "constant.numeric.sched",
    "STRING": "string.quoted.double.sched",
    "DOCSTRING": "string.quoted.docstring.sched",
    "MEMORY_VERB": "keyword.other.sched",
    "MEMORY_SETTING": "keyword.other.sched",
    "COMP_OP": "keyword.operator.comparison.sched",
    "ADD_OP": "keyword.operator.arithmetic.sched",
    "MUL_OP": "keyword.operator.arithmetic.sched",
    "MINUS": "keyword.operator.arithmetic.sched",
    "STAR": "keyword.operator.arithmetic.sched",
    "EQUAL": "keyword.operator.assignment.sched",
    "LBRACE": "punctuation.section.braces.sched",
    "RBRACE": "punctuation.section.braces.sched",
    "LPAR": "punctuation.section.parens.sched",
    "RPAR": "punctuation.section.parens.sched",
    "LSQB": "punctuation.section.brackets.sched",
    "RSQB": "punctuation.section.brackets.sched",
    "COMMA": "punctuation.separator.comma.sched",
    "COLON": "punctuation.separator.colon.sched",
    "SEMICOLON": "punctuation.terminator.sched",
}
COMMENT = "comment.line.number-sign.sched"
CELL = "constant.other.cell.sched"


def lexed(text: str) -> list:
    """The tokens the language's lexer reads (up to a syntax error, for the UI cases that hold one)."""
    tokens = []
    try:
        for token in grammar_tables.parser().parse_interactive(text).iter_parse():
            tokens.append(token)
    except UnexpectedInput:
        pass
    return tokens


def intended(tokens: list) -> list[tuple[object, str | list[str]]]:
    """(token, the scope each of its characters should have; a list: per character)."""
    out = []
    in_row = False
    for i, tok in enumerate(tokens):
        prev = tokens[i - 1] if i else None
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        value = str(tok)
        row_start = tok.type == "RANK" and nxt is not None and nxt.type == "INT"
        if row_start:
            in_row = True
        elif tok.type == "RBRACE":
            in_row = False
        if row_start:
            scope = "keyword.other.row.sched"
        elif in_row and tok.type in ("NAME", "DOT"):
            scope = CELL
        elif tok.type in ("SIGNED_INT", "SIGNED_FLOAT"):
            digits = "constant.numeric.sched"
            scope = ["keyword.operator.arithmetic.sched" if c == "-" else digits for c in value]
        elif tok.type == "NAME":
            if prev is not None and prev.type in DEFINED:
                scope = DEFINED[prev.type]
            elif value in KINDS:
                scope = "support.type.job.sched"
            elif value in BUILT_IN_NAMES:
                scope = "variable.language.sched"
            elif nxt is not None and nxt.type == "LPAR":
                scope = "support.function.builtin.sched" if value in FUNCTIONS else "entity.name.function.call.sched"
            else:
                scope = PLAIN
        elif value == "..":
            scope = "keyword.operator.range.sched"
        elif value in KEYWORDS:
            scope = KEYWORDS[value]
        else:
            scope = BY_TYPE[tok.type]
        out.append((tok, scope))
    return out


def comments(text: str, tokens: list) -> list[tuple[int, int, int]]:
    """(line, first column, last column + 1) of each comment: `#` to the end of the line, outside tokens."""
    spans, pos = [], 0
    for tok in [*tokens, None]:
        end = tok.start_pos if tok is not None else len(text)
        for m in re.finditer(r"#[^\n]*", text[pos:end]):
            at = pos + m.start()
            line = text.count("\n", 0, at)
            column = at - (text.rfind("\n", 0, at) + 1)
            spans.append((line, column, column + len(m.group())))
        if tok is None or tok.end_pos is None:
            break
        pos = tok.end_pos
    return spans


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_token_gets_its_scope(path: Path):
    text = path.read_text(encoding="utf-8")
    scopes = GRAMMAR.scopes(text)
    tokens = lexed(text)
    assert tokens, "every file has tokens"
    wrong = []
    for tok, scope in intended(tokens):
        if tok.type.isupper() and text[tok.end_pos : tok.end_pos + 1].isalnum():
            continue  # a keyword the lexer cut off a longer word (`placement vshaped`, a typo's case): a name
        for k, char in enumerate(str(tok)):
            if char == "\n":
                continue
            line = tok.line - 1 + str(tok)[:k].count("\n")
            column = (tok.column - 1 + k) if line == tok.line - 1 else k - str(tok)[:k].rfind("\n") - 1
            want = scope[k] if isinstance(scope, list) else scope
            got = scopes[line][column][-1]
            if got != want:
                wrong.append(f"{line + 1}:{column + 1} {tok.type} `{tok}`: {got}, not {want}")
                break
    for line, start, end in comments(text, tokens):
        got = {scopes[line][c][-1] for c in range(start, end)}
        if got != {COMMENT}:
            wrong.append(f"{line + 1}:{start + 1} comment: {sorted(got)}")
    assert not wrong, "\n".join(wrong[:20])


def test_every_keyword_of_the_language_has_a_scope():
    """A keyword added to `sched.lark` must be added to the grammar (and here)."""
    words = {
        t.pattern.value
        for t in grammar_tables.parser().terminals
        if t.pattern.type == "str" and re.fullmatch(r"[a-z_]+", t.pattern.value)
    }
    verbs = {"allocates", "frees", "keeps", "moves", "fraction"}  # MEMORY_VERB and MEMORY_SETTING: patterns
    assert words - set(KEYWORDS) == set()
    words = sorted(words | verbs)
    scopes = GRAMMAR.scopes("\n".join(words))  # one a line: `fn` would make the next word a function's name
    for word, line in zip(words, scopes, strict=True):
        assert {s[-1] for s in line} == {KEYWORDS.get(word, "keyword.other.sched")}, word


def test_names_that_contain_keywords_stay_plain():
    text = "order { let forwarder = x_if + rank_1 + order2 forwarder }"
    scopes = GRAMMAR.scopes(text)[0]
    for name in ("x_if", "rank_1", "order2"):
        at = text.index(name)
        assert {scopes[c][-1] for c in range(at, at + len(name))} == {PLAIN}, name
    at = text.rindex("forwarder")
    assert scopes[at][-1] == PLAIN


def test_a_hash_in_a_string_or_a_docstring_is_no_comment():
    text = '"""a # b\n  # c\n"""\nrequire pp > 1 : "x # y"  # z'
    scopes = GRAMMAR.scopes(text)
    assert scopes[1][2][-1] == "string.quoted.docstring.sched"
    assert scopes[3][text.split("\n")[3].index("# y")][-1] == "string.quoted.double.sched"
    assert scopes[3][text.split("\n")[3].index("# z")][-1] == COMMENT


def test_the_extension_manifest_names_its_parts_and_settings():
    manifest = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    (language,) = manifest["contributes"]["languages"]
    assert language["extensions"] == [".sched"]
    (EXTENSION / language["configuration"]).resolve(strict=True)
    (grammar,) = manifest["contributes"]["grammars"]
    assert grammar["scopeName"] == GRAMMAR.root[0] and (EXTENSION / grammar["path"]).is_file()
    assert (EXTENSION / manifest["main"]).is_file()
    settings = manifest["contributes"]["configuration"]["properties"]
    assert {"ppdsl.path", "ppdsl.pp", "ppdsl.microbatches", "ppdsl.vpp"} <= set(settings)
    assert "vscode-languageclient" in manifest["dependencies"]
    config = json.loads((EXTENSION / "language-configuration.json").read_text(encoding="utf-8"))
    assert config["comments"] == {"lineComment": "#"}
    assert ["{", "}"] in config["brackets"] and ["(", ")"] in config["brackets"]
