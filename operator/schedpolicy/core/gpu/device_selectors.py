"""The part of DeviceClass CEL this operator evaluates, to know which published devices a
class selects. Pure.

GPU fill counts a node's devices of the policy's device classes, so it must know which
devices a class's `selectors[].cel.expression` accepts. The drivers' own classes use a
small part of CEL: comparisons of `device.driver` and of device attributes with literals,
joined by `&&`, `||` and `!`. That part is evaluated here. An expression outside it
(capacity quantities, `semver()`, macros) is refused with the reason, and the class then
selects nothing: a fill that leaves a class out says so, it never guesses.

An attribute the device lacks makes its comparison false, where CEL would raise; the
scheduler does not allocate such a device either, so the two agree on what is selected.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

Value = str | int | bool

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<number>-?\d+)
      | (?P<op>&&|\|\||==|!=|<=|>=|<|>|!|\(|\)|\[|\]|\.)
      | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    )""",
    re.VERBOSE,
)


class SelectorError(ValueError):
    """An expression this evaluator does not read; the message says where."""


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    at: int


def _tokens(expression: str) -> list[Token]:
    out: list[Token] = []
    pos = 0
    while pos < len(expression):
        if expression[pos:].strip() == "":
            break
        match = _TOKEN.match(expression, pos)
        if match is None or match.end() == pos:
            raise SelectorError(f"unexpected {expression[pos:].strip()[:20]!r} at {pos}")
        kind = match.lastgroup or ""
        out.append(Token(kind, match.group(kind), match.start(kind)))
        pos = match.end()
    return out


@dataclass(frozen=True)
class DeviceView:
    """What an expression may read of a device: its driver, and its attributes by domain."""

    driver: str
    attributes: Mapping[str, Mapping[str, Value]]  # domain -> short name -> value


# The parsed expression is a tree of tuples; evaluation walks it.
Node = tuple[object, ...]


class _Parser:
    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.tokens = _tokens(expression)
        self.pos = 0

    def peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, text: str | None = None, kind: str | None = None) -> Token:
        token = self.peek()
        if token is None:
            raise SelectorError(f"expression ends where {text or kind} was expected")
        if (text is not None and token.text != text) or (kind is not None and token.kind != kind):
            raise SelectorError(f"expected {text or kind} at {token.at}, found {token.text!r}")
        self.pos += 1
        return token

    def parse(self) -> Node:
        tree = self.disjunction()
        if self.peek() is not None:
            token = self.tokens[self.pos]
            raise SelectorError(f"unexpected {token.text!r} at {token.at}")
        return tree

    def disjunction(self) -> Node:
        terms = [self.conjunction()]
        while (t := self.peek()) is not None and t.text == "||":
            self.take("||")
            terms.append(self.conjunction())
        return terms[0] if len(terms) == 1 else ("or", *terms)

    def conjunction(self) -> Node:
        terms = [self.unary()]
        while (t := self.peek()) is not None and t.text == "&&":
            self.take("&&")
            terms.append(self.unary())
        return terms[0] if len(terms) == 1 else ("and", *terms)

    def unary(self) -> Node:
        token = self.peek()
        if token is not None and token.text == "!":
            self.take("!")
            return ("not", self.unary())
        if token is not None and token.text == "(":
            self.take("(")
            inner = self.disjunction()
            self.take(")")
            return inner
        left = self.operand()
        op = self.peek()
        if op is not None and op.text in ("==", "!=", "<", "<=", ">", ">="):
            self.take()
            return ("cmp", op.text, left, self.operand())
        if left[0] == "lit" and isinstance(left[1], bool):
            return left
        if left[0] == "path":
            return ("truthy", left)
        raise SelectorError(f"{self._text(token)} is not a condition")

    def _text(self, token: Token | None) -> str:
        return repr(token.text) if token is not None else "the end"

    def operand(self) -> Node:
        token = self.take()
        if token.kind == "string":
            return ("lit", _unquote(token.text))
        if token.kind == "number":
            return ("lit", int(token.text))
        if token.kind == "ident" and token.text in ("true", "false"):
            return ("lit", token.text == "true")
        if token.kind == "ident" and token.text == "device":
            return self.path()
        raise SelectorError(
            f"{token.text!r} at {token.at} is outside what this version evaluates"
            " (device.driver and device.attributes compared with literals)"
        )

    def path(self) -> Node:
        self.take(".")
        field = self.take(kind="ident")
        if field.text == "driver":
            return ("path", "driver")
        if field.text != "attributes":
            raise SelectorError(
                f"device.{field.text} at {field.at} is outside what this version evaluates"
            )
        self.take("[")
        domain = _unquote(self.take(kind="string").text)
        self.take("]")
        nxt = self.take()
        if nxt.text == ".":
            name = self.take(kind="ident").text
        elif nxt.text == "[":
            name = _unquote(self.take(kind="string").text)
            self.take("]")
        else:
            raise SelectorError(f"expected an attribute name at {nxt.at}")
        after = self.peek()
        if after is not None and after.text in (".", "["):
            raise SelectorError(
                f"a method or index on device.attributes[{domain!r}].{name} at {after.at} is"
                " outside what this version evaluates"
            )
        return ("path", "attr", domain, name)


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1])


def parse(expression: str) -> Node:
    """The expression as a tree, or SelectorError naming what it cannot read."""
    return _Parser(expression).parse()


_MISSING = object()


def _resolve(path: Node, device: DeviceView) -> object:
    if path[1] == "driver":
        return device.driver
    domain, name = str(path[2]), str(path[3])
    return device.attributes.get(domain, {}).get(name, _MISSING)


def _value(node: Node, device: DeviceView) -> object:
    return node[1] if node[0] == "lit" else _resolve(node, device)


def _compare(op: str, left: object, right: object) -> bool:
    if left is _MISSING or right is _MISSING:
        return False
    if type(left) is not type(right):
        return op == "!="  # CEL has no cross-type equality; "!=" is the only true answer
    if op == "==":
        return left == right
    if op == "!=":
        return left != right
    if isinstance(left, bool) or not isinstance(left, int | str):
        return False
    assert isinstance(right, int | str)
    return {
        "<": left < right,  # type: ignore[operator]
        "<=": left <= right,  # type: ignore[operator]
        ">": left > right,  # type: ignore[operator]
        ">=": left >= right,  # type: ignore[operator]
    }[op]


def evaluate(tree: Node, device: DeviceView) -> bool:
    kind = tree[0]
    if kind == "or":
        return any(evaluate(t, device) for t in tree[1:])  # type: ignore[arg-type]
    if kind == "and":
        return all(evaluate(t, device) for t in tree[1:])  # type: ignore[arg-type]
    if kind == "not":
        return not evaluate(tree[1], device)  # type: ignore[arg-type]
    if kind == "lit":
        return bool(tree[1])
    if kind == "truthy":
        return _resolve(tree[1], device) is True  # type: ignore[arg-type]
    _, op, left, right = tree
    return _compare(str(op), _value(left, device), _value(right, device))  # type: ignore[arg-type]


@dataclass(frozen=True)
class ClassSelectors:
    """A DeviceClass's selectors, all of which a device must satisfy; or why not read."""

    name: str
    trees: tuple[Node, ...]
    error: str | None = None

    def selects(self, device: DeviceView) -> bool:
        return self.error is None and all(evaluate(t, device) for t in self.trees)


def class_selectors(name: str, expressions: list[str]) -> ClassSelectors:
    trees: list[Node] = []
    for index, expression in enumerate(expressions):
        try:
            trees.append(parse(expression))
        except SelectorError as err:
            return ClassSelectors(
                name, (), f"DeviceClass {name}: spec.selectors[{index}].cel.expression: {err}"
            )
    return ClassSelectors(name, tuple(trees))
