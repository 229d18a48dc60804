"""DSL bodies recompiled so that their `%`, `//` and `divmod` divide like the device.

PyPTO does not run a DSL function's body as Python: its parser turns the body's syntax
into IR, so a `%` or `//` there is the device's scalar operation, which truncates toward
zero (docs/model.md), whatever its operands are in Python: `k = 0; (k - 1) % nr` is -1
for a literal `k` and a factory's `nr` too. racecheck runs the bodies, so it recompiles
each one from its source with every `a % b`, `a // b`, `a %= b`, `a //= b` and
`divmod(a, b)` made a call of `device_arithmetic`, at the operator's own line and
column: two Python ints divide like the device, anything else (a `DeviceInt`, a value
read from memory, a float, an array) as its own operator says.

A clamp written as a branch, `if n > T: n = T` (or `<`, `>=`, `<=`, either side; no
`else`, the body that one assignment, `T` a name, constant or arithmetic of them), is
the same call with `n` and `T`: it computes what the branch does, and for an integer
read from an input it is the exact choice `min(n, T)` (`max` for a lower clamp) that
`pl.min` gives, with no branch to split paths on (docs/model.md §1).

Any other `if` without `else` whose body bumps a name by a constant (`n = n + K`,
`n += K`: a slot counter) and has no `return`, `break`, `continue`, `raise` or `yield`
becomes `if branch(C): BODY; branch_end()` with each such bump a call of `bump`
(`racecheck.dsl.summary`): the branch and the addition, except in a summary run.
"""

from __future__ import annotations
import __future__

import ast
import copy
import dis
import functools
import inspect
import linecache
import operator
from collections.abc import Callable, Iterator
from enum import Enum
from types import CellType, CodeType, FunctionType
from typing import Any

from racecheck.dsl.counters import bump_of, counters_of, own_statements
from racecheck.dsl.location import innermost_user_frame
from racecheck.dsl.scalars import Tainted, chosen_scalar, truncating_div, truncating_mod
from racecheck.dsl.symbolic import Op

FUTURE_FLAGS = functools.reduce(
    operator.or_, (getattr(__future__, name).compiler_flag for name in __future__.all_feature_names)
)
"""The `from __future__` imports a code object's `co_flags` carry: a body is recompiled
with those of its module (annotations left unevaluated stay so)."""

HELPER = "_racecheck_device_arithmetic"
_TARGET = "_racecheck_target"
_KEY = "_racecheck_key"


class Operator(Enum):
    MOD = "%"
    FLOOR_DIV = "//"
    DIVMOD = "divmod"
    # `if n OP T: n = T`, by the comparison that keeps T (n > T: T is the upper bound)
    UPPER = "if n > T: n = T"
    UPPER_EQ = "if n >= T: n = T"
    LOWER = "if n < T: n = T"
    LOWER_EQ = "if n <= T: n = T"
    # a branch with slot counters (`racecheck.dsl.summary`): its test, a bump, its end
    BRANCH = "branch"
    BUMP = "bump"
    BRANCH_END = "end"


_CLAMP_TESTS: dict[Operator, Callable[[Any, Any], Any]] = {
    Operator.UPPER: operator.gt,
    Operator.UPPER_EQ: operator.ge,
    Operator.LOWER: operator.lt,
    Operator.LOWER_EQ: operator.le,
}


def _python(operator: Operator, left: Any, right: Any) -> Any:
    if operator in _CLAMP_TESTS:
        return right if _CLAMP_TESTS[operator](left, right) else left
    if operator is Operator.MOD:
        return left % right
    if operator is Operator.FLOOR_DIV:
        return left // right
    return divmod(left, right)


def device_arithmetic(symbol: str, left: Any, right: Any) -> Any:
    """`left <op> right` in a DSL body: truncating for two Python ints (bools count)."""
    operator = Operator(symbol)
    if operator in _CLAMP_TESTS:
        return _clamped(operator, left, right)
    if operator in _COUNTING:
        return _counting(operator, left, right)
    if type(left) not in (int, bool) or type(right) not in (int, bool):
        return _python(operator, left, right)
    if operator is Operator.MOD:
        return truncating_mod(left, right)
    if operator is Operator.FLOOR_DIV:
        return truncating_div(left, right)
    return truncating_div(left, right), truncating_mod(left, right)


def _clamped(clamp: Operator, value: Any, bound: Any) -> Any:
    """`if value OP bound: value = bound` (`clamp`): for an integer read from memory with
    a symbolic form, the exact `min`/`max` choice `chosen_scalar` makes (its value is the
    branch's); for anything else the branch itself."""
    if isinstance(value, Tainted) or isinstance(bound, Tainted):
        upper = clamp in (Operator.UPPER, Operator.UPPER_EQ)
        choice = chosen_scalar(Op.MIN if upper else Op.MAX, value, bound)
        if isinstance(choice, Tainted) and choice.symbolic is not None:
            return choice
    return _python(clamp, value, bound)


_COUNTING = frozenset({Operator.BRANCH, Operator.BUMP, Operator.BRANCH_END})


def _counting(operator: Operator, left: Any, right: Any) -> Any:
    from racecheck.dsl import summary  # it imports the DSL's scopes, which import this

    if operator is Operator.BRANCH:
        return summary.branch(left, right)
    if operator is Operator.BUMP:
        step, line = right
        return summary.bump(left, step, line)
    summary.branch_end(right)
    return None


_SYMBOLS: dict[type[ast.operator], Operator] = {
    ast.Mod: Operator.MOD,
    ast.FloorDiv: Operator.FLOOR_DIV,
}


def _call(operator: Operator, left: ast.expr, right: ast.expr, at: ast.AST) -> ast.Call:
    call = ast.Call(
        func=ast.Name(id=HELPER, ctx=ast.Load()),
        args=[ast.Constant(value=operator.value), left, right],
        keywords=[],
    )
    return ast.fix_missing_locations(ast.copy_location(call, at))


class _DeviceArithmetic(ast.NodeTransformer):
    """Rewrites the operators; every new node takes the location of the one it replaces."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.expr:
        self.generic_visit(node)
        operator = _SYMBOLS.get(type(node.op))
        if operator is None:
            return node
        return _call(operator, node.left, node.right, node)

    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)
        if (
            isinstance(node.func, ast.Name)
            and node.func.id == "divmod"
            and len(node.args) == 2
            and not node.keywords
            and not any(isinstance(argument, ast.Starred) for argument in node.args)
        ):
            return _call(Operator.DIVMOD, node.args[0], node.args[1], node)
        return node

    def visit_If(self, node: ast.If) -> ast.stmt:
        self.generic_visit(node)
        found = clamp_of(node)
        if found is None:
            return _counting_branch(node)
        clamp, name, bound = found
        call = _call(clamp, _name(name), bound, node.test)
        assign = ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=call)
        return ast.fix_missing_locations(ast.copy_location(assign, node))

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.stmt | list[ast.stmt]:
        self.generic_visit(node)
        operator = _SYMBOLS.get(type(node.op))
        if operator is None:
            return node
        target = node.target
        if isinstance(target, ast.Name):
            value = _call(operator, ast.Name(id=target.id, ctx=ast.Load()), node.value, node)
            return ast.copy_location(ast.Assign(targets=[target], value=value), node)
        # `t[k] op= v` evaluates t and k once, then reads, computes and stores
        staged: list[ast.stmt] = [_assign(_TARGET, target.value, node)]
        if isinstance(target, ast.Subscript):
            staged.append(_assign(_KEY, target.slice, node))
            place: ast.expr = ast.Subscript(value=_name(_TARGET), slice=_name(_KEY))
        else:
            assert isinstance(target, ast.Attribute)
            place = ast.Attribute(value=_name(_TARGET), attr=target.attr)
        stored = _place_as(place, ast.Store())
        value = _call(operator, _place_as(place, ast.Load()), node.value, node)
        staged.append(ast.copy_location(ast.Assign(targets=[stored], value=value), node))
        return [ast.fix_missing_locations(statement) for statement in staged]


_KEPT: dict[type[ast.cmpop], tuple[Operator, Operator]] = {
    # the comparison, with n on its left / on its right, and the clamp it is
    ast.Gt: (Operator.UPPER, Operator.LOWER),
    ast.GtE: (Operator.UPPER_EQ, Operator.LOWER_EQ),
    ast.Lt: (Operator.LOWER, Operator.UPPER),
    ast.LtE: (Operator.LOWER_EQ, Operator.UPPER_EQ),
}


def clamp_of(node: ast.If) -> tuple[Operator, str, ast.expr] | None:
    """`if n OP T: n = T` as (the clamp, n, T): no `else`, one plain assignment of the
    name compared, from the expression it was compared with, which has no call, no
    subscript and no assignment in it (evaluating it again gives the same value)."""
    test, body = node.test, node.body
    if node.orelse or len(body) != 1 or not isinstance(body[0], ast.Assign):
        return None
    assign = body[0]
    if len(assign.targets) != 1 or not isinstance(assign.targets[0], ast.Name):
        return None
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 or type(test.ops[0]) not in _KEPT:
        return None
    name = assign.targets[0].id
    left, right = test.left, test.comparators[0]
    on_left = isinstance(left, ast.Name) and left.id == name
    bound = right if on_left else left
    if not on_left and not (isinstance(right, ast.Name) and right.id == name):
        return None
    if ast.dump(bound) != ast.dump(assign.value) or not _pure(bound, name):
        return None
    return _KEPT[type(test.ops[0])][0 if on_left else 1], name, bound


def _counting_branch(node: ast.If) -> ast.stmt:
    """`node` as a branch with slot counters (`counters_of`), or as it is."""
    counters = counters_of(node)
    if not counters:
        return node
    line = node.lineno
    for statement in own_statements(node):
        bumped = bump_of(statement)
        if bumped is None or bumped[0] not in counters:
            continue
        name, step = bumped
        place = ast.Tuple(elts=[ast.Constant(step), ast.Constant(line)], ctx=ast.Load())
        call = _call(Operator.BUMP, _name(name), place, statement)
        assign = ast.copy_location(
            ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=call), statement
        )
        _replace(node, statement, ast.fix_missing_locations(assign))
    test = _call(Operator.BRANCH, node.test, ast.Constant(line), node.test)
    end = _call(Operator.BRANCH_END, ast.Constant(None), ast.Constant(line), node)
    last = node.body[-1]
    closing = ast.Expr(value=end)
    ast.copy_location(closing, last)
    closing.lineno = closing.end_lineno = getattr(last, "end_lineno", last.lineno)
    node.test = test
    node.body = [*node.body, ast.fix_missing_locations(closing)]
    return node


def _replace(root: ast.AST, old: ast.stmt, new: ast.stmt) -> None:
    """Put `new` where `old` is in a statement list under `root`."""
    for parent in ast.walk(root):
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(parent, field, None)
            if isinstance(statements, list) and any(s is old for s in statements):
                statements[[id(s) for s in statements].index(id(old))] = new
                return


def _pure(expr: ast.expr, name: str) -> bool:
    allowed = (ast.Name, ast.Constant, ast.Attribute, ast.BinOp, ast.UnaryOp, ast.Load)
    return all(
        isinstance(node, (*allowed, ast.operator, ast.unaryop)) for node in ast.walk(expr)
    ) and not any(isinstance(node, ast.Name) and node.id == name for node in ast.walk(expr))


def _name(identifier: str) -> ast.Name:
    return ast.Name(id=identifier, ctx=ast.Load())


def _assign(identifier: str, value: ast.expr, at: ast.AST) -> ast.stmt:
    statement = ast.Assign(targets=[ast.Name(id=identifier, ctx=ast.Store())], value=value)
    return ast.fix_missing_locations(ast.copy_location(statement, at))


def _place_as(place: ast.expr, context: ast.expr_context) -> ast.expr:
    if isinstance(place, ast.Subscript):
        return ast.Subscript(value=place.value, slice=place.slice, ctx=context)
    assert isinstance(place, ast.Attribute)
    return ast.Attribute(value=place.value, attr=place.attr, ctx=context)


def _with_device_arithmetic(definition: ast.FunctionDef) -> ast.FunctionDef:
    """`definition` (a copy the caller owns) with its operators rewritten."""
    rewritten = _DeviceArithmetic().visit(definition)
    assert isinstance(rewritten, ast.FunctionDef)
    return rewritten


def compiled_function(
    definition: ast.FunctionDef, filename: str, globals: dict[str, Any], future: int
) -> FunctionType:
    """`definition`, a function without free variables, its operators rewritten, compiled
    at its own lines of `filename` with the `from __future__` imports of `future`
    (`FUTURE_FLAGS`), over `globals`."""
    code = _compiled_code(definition, filename, (), None, future)
    return _function(code, globals, {})


def _function(code: CodeType, globals: dict[str, Any], cells: dict[str, CellType]) -> FunctionType:
    free = {**cells, HELPER: CellType(device_arithmetic)}
    closure = tuple(free[name] for name in code.co_freevars)
    return FunctionType(code, globals, code.co_name, None, closure)


def _compiled_code(
    definition: ast.FunctionDef,
    filename: str,
    free: tuple[str, ...],
    class_name: str | None,
    future: int,
) -> CodeType:
    """The code of `definition` with its operators rewritten, whose free variables may be
    `free` and the helper. Within `class_name` its private names are mangled as in the
    class it was written in."""
    definition = _with_device_arithmetic(definition)
    outer = ast.FunctionDef(
        name="_racecheck_scope",
        args=ast.arguments(
            posonlyargs=[],
            args=[ast.arg(arg=name) for name in dict.fromkeys((*free, HELPER))],
            kwonlyargs=[],
            kw_defaults=[],
            defaults=[],
        ),
        body=[definition, ast.Return(value=_name(definition.name))],
        decorator_list=[],
        returns=None,
    )
    scope: ast.stmt = outer
    if class_name is not None:
        scope = ast.ClassDef(
            name=class_name, bases=[], keywords=[], body=[outer], decorator_list=[]
        )
    module = ast.Module(body=[ast.copy_location(scope, definition)], type_ignores=[])
    compiled = compile(
        ast.fix_missing_locations(module),
        filename,
        "exec",
        flags=future & FUTURE_FLAGS,
        dont_inherit=True,
    )
    return _inner(compiled, definition)


def _inner(code: CodeType, definition: ast.FunctionDef) -> CodeType:
    """The code of `definition` among the constants nested in `code`."""
    nested = [constant for constant in code.co_consts if isinstance(constant, CodeType)]
    while nested:
        candidate = nested.pop()
        if candidate.co_name == definition.name and candidate.co_firstlineno == definition.lineno:
            return candidate
        nested.extend(c for c in candidate.co_consts if isinstance(c, CodeType))
    raise LookupError(definition.name)


@functools.lru_cache(maxsize=16)
def _definitions(source: str, filename: str) -> dict[tuple[str, int], ast.FunctionDef]:
    """The file's function definitions by name and first line (the first decorator's)."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError:
        return {}
    return {
        (node.name, min([node.lineno, *(d.lineno for d in node.decorator_list)])): node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
    }


def returned_names(function: Callable[..., Any]) -> tuple[str, ...] | None:
    """The names `function`'s every `return` gives, as written (`return out, signal`):
    PyPTO reads an unannotated function's results from them. None when its source is
    not readable, or a `return` gives anything but names, or two give different ones."""
    code = getattr(function, "__code__", None)
    if not isinstance(code, CodeType):
        return None
    source = "".join(linecache.getlines(code.co_filename, getattr(function, "__globals__", None)))
    written = _definitions(source, code.co_filename).get((code.co_name, code.co_firstlineno))
    if written is None:
        return None
    given = {_names(node.value) for node in _own_returns(written)}
    return given.pop() if len(given) == 1 else None


def _own_returns(definition: ast.FunctionDef) -> Iterator[ast.Return]:
    """The `return` statements of `definition` itself, not of functions it defines."""
    pending: list[ast.AST] = list(definition.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Return):
            yield node
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))


def _names(value: ast.expr | None) -> tuple[str, ...] | None:
    """`value`'s names when it is a name or a tuple of names, else None."""
    items = value.elts if isinstance(value, ast.Tuple) else [value]
    names = tuple(item.id for item in items if isinstance(item, ast.Name))
    return names if len(names) == len(items) else None


def _divides(definition: ast.FunctionDef) -> bool:
    """Whether `definition` holds an operator that `_with_device_arithmetic` rewrites."""
    return any(
        isinstance(node, ast.If)
        and (clamp_of(node) is not None or bool(counters_of(node)))
        or isinstance(node, (ast.BinOp, ast.AugAssign))
        and type(node.op) in _SYMBOLS
        or isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "divmod"
        for node in ast.walk(definition)
    )


@functools.lru_cache(maxsize=256)
def _device_code(
    source: str,
    filename: str,
    name: str,
    first_line: int,
    class_name: str | None,
    free: tuple[str, ...],
    future: int,
) -> CodeType | bool:
    """The recompiled code of the function `name` at `first_line`; True if it has nothing
    to rewrite, False if it is not in `source`. A program built once per rank count
    compiles its functions once."""
    written = _definitions(source, filename).get((name, first_line))
    if written is None:
        return False
    if not _divides(written):
        return True
    return _compiled_code(_bare(written, first_line), filename, free, class_name, future)


def _class_of(function: FunctionType) -> str | None:
    """The class `function` was written in, from its qualified name."""
    parts = function.__qualname__.split(".")
    return parts[-2] if len(parts) > 1 and parts[-2] != "<locals>" else None


def on_device(function: Callable[..., Any]) -> Callable[..., Any] | None:
    """`function`, a DSL function as written, with the device's arithmetic and everything
    else as it was: name, defaults, annotations, closure, globals, lines (itself when it
    does not divide). None when it is not a function written in a readable file (the
    caller says so): made by `exec`, or wrapped by another decorator."""
    if (
        not isinstance(function, FunctionType)
        or not _defined_by_a_caller(function)
        or _layers(function)[1:]
    ):
        return None
    code = function.__code__
    linecache.checkcache(code.co_filename)  # the file as it is now, as it was imported
    source = "".join(linecache.getlines(code.co_filename, function.__globals__))
    device = _device_code(
        source,
        code.co_filename,
        code.co_name,
        code.co_firstlineno,
        _class_of(function),
        code.co_freevars,
        code.co_flags & FUTURE_FLAGS,
    )
    if not isinstance(device, CodeType):
        return function if device else None
    cells = dict(zip(code.co_freevars, function.__closure__ or (), strict=True))
    recompiled = _function(device, function.__globals__, cells)
    recompiled.__defaults__ = function.__defaults__
    recompiled.__kwdefaults__ = function.__kwdefaults__
    recompiled.__annotations__ = function.__annotations__
    recompiled.__dict__.update(function.__dict__)
    recompiled.__qualname__ = function.__qualname__
    recompiled.__module__ = function.__module__
    recompiled.__doc__ = function.__doc__
    return recompiled


def _defined_by_a_caller(function: FunctionType) -> bool:
    """Whether code now running (the user's, applying the decorator) made `function`
    with its `def`: another decorator's wrapper (`def wrapper(self, x, y)` returned by
    a user decorator below the pl one) was made by code that has returned, and its
    source is not the DSL body. Decorating outside a loaded user file cannot tell, and
    counts as made there."""
    frame = innermost_user_frame()
    if frame is None:
        return True
    while frame is not None:
        if any(constant is function.__code__ for constant in frame.f_code.co_consts):
            return True
        frame = frame.f_back
    return False


def _bare(written: ast.FunctionDef, first_line: int) -> ast.FunctionDef:
    """A copy of `written` without what ran when its `def` did (decorators, defaults,
    annotations: the recompiled function takes them from the original), starting at
    `first_line` as the original's code does."""
    arguments = written.args
    bare = ast.FunctionDef(
        name=written.name,
        args=ast.arguments(
            posonlyargs=[_unannotated(argument) for argument in arguments.posonlyargs],
            args=[_unannotated(argument) for argument in arguments.args],
            vararg=arguments.vararg and _unannotated(arguments.vararg),
            kwonlyargs=[_unannotated(argument) for argument in arguments.kwonlyargs],
            kw_defaults=[None] * len(arguments.kwonlyargs),
            kwarg=arguments.kwarg and _unannotated(arguments.kwarg),
            defaults=[],
        ),
        body=copy.deepcopy(written.body),
        decorator_list=[],
        returns=None,
    )
    ast.copy_location(bare, written)
    bare.lineno = first_line
    return bare


def _unannotated(argument: ast.arg) -> ast.arg:
    return ast.copy_location(ast.arg(arg=argument.arg), argument)


_DIVIDING = frozenset({"%", "//", "%=", "//="})


def divides(code: CodeType) -> bool:
    """Whether `code` (or a function nested in it) has a `%`, `//` or `divmod`: what a
    body racecheck cannot recompile would compute with Python's rounding."""
    for instruction in dis.get_instructions(code):
        if instruction.opname == "BINARY_OP" and instruction.argrepr in _DIVIDING:
            return True
        if instruction.argval == "divmod" and instruction.opname.startswith("LOAD_"):
            return True
        if isinstance(instruction.argval, CodeType) and divides(instruction.argval):
            return True
    return False


_FORWARDS = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS


def _layers(function: Any, *, closures: bool = False) -> list[Any]:
    """`function` and the functions it wraps, at any depth: `__wrapped__`, and for a
    decorator's wrapper without it (`def wrapper(*args, **kwargs)`, or any function
    with `closures`), the functions its closure holds."""
    layers: list[Any] = []
    pending = [function]
    while pending:
        layer = pending.pop()
        if any(layer is seen for seen in layers):
            continue
        layers.append(layer)
        wrapped = getattr(layer, "__wrapped__", None)
        if wrapped is not None:
            pending.append(wrapped)
        code = getattr(layer, "__code__", None)
        if code is not None and (closures or code.co_flags & _FORWARDS == _FORWARDS):
            cells = getattr(layer, "__closure__", None) or ()
            pending.extend(
                _contents(cell) for cell in cells if isinstance(_contents(cell), FunctionType)
            )
    return layers


def _contents(cell: CellType) -> object:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def divides_as_python(function: Any) -> bool:
    """Whether `function`, run as written (not recompiled), or a function it wraps or
    closes over may compute a `%`, `//` or `divmod` with Python's rounding."""
    return any(
        getattr(layer, "__code__", None) is None or divides(layer.__code__)
        for layer in _layers(function, closures=True)
    )
