"""`marketplace privacy compose|calibrate`: the accountant from the command line.

:func:`add_parser` adds ``privacy compose`` and ``privacy calibrate`` to the main parser
(:mod:`marketplace.cli`); each sets ``func``, which reads no scenario.

Numbers may be written as small arithmetic expressions (``0.01/sqrt(5*200)``, ``5*200``): they
are parsed with :mod:`ast` and only numbers, ``+ - * / **``, parentheses, ``sqrt``, ``log``,
``exp`` and the constants ``pi`` and ``e`` are evaluated; nothing is passed to ``eval``.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import operator
import sys
from collections.abc import Callable
from typing import Any

from marketplace.privacy import accountant

EXIT_OK, EXIT_USAGE = 0, 2
MAX_EXPRESSION = 200

EXAMPLES = """\
examples:
  marketplace privacy compose --epsilon 0.01 --count 1656 --delta 0.01
  marketplace privacy compose --epsilon '0.01/sqrt(5*200)' --count '5*200' --delta 1e-4
  marketplace privacy compose --epsilon 0.01 --count 1656 --delta 0.01 --theorem all
  marketplace privacy calibrate --total-epsilon 1.40 --count 1656 --delta 0.01 --theorem optimal
"""

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS = {"sqrt": math.sqrt, "log": math.log, "exp": math.exp}
_CONSTANTS = {"pi": math.pi, "e": math.e}


def number(text: Any, *, name: str) -> float:
    """A finite float from a number or a safe arithmetic expression; ValueError naming ``name``."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_EXPRESSION:
            raise ValueError(
                f"{name}: expected a number or an expression of at most {MAX_EXPRESSION} characters, got {text!r}"
            )
        try:
            value = float(_evaluate(ast.parse(text.strip(), mode="eval").body))
        except OverflowError:
            raise ValueError(f"{name}: {text!r} overflows a float") from None
        except (SyntaxError, ValueError, ZeroDivisionError, TypeError) as err:
            raise ValueError(
                f"{name}: cannot read {text!r} ({err}); use a number or an expression of "
                "numbers, + - * / **, parentheses, sqrt(), log(), exp(), pi and e"
            ) from None
    if not math.isfinite(value):
        raise ValueError(f"{name}: {text!r} is not a finite number")
    return value


def positive(text: Any, *, name: str) -> float:
    """A finite number > 0; ValueError naming ``name``."""
    value = number(text, name=name)
    if value <= 0:
        raise ValueError(f"{name}: expected a number > 0, got {text!r}")
    return value


def integer(text: Any, *, name: str) -> int:
    """A whole number (``1656``, ``5*200``, ``1e3``); ValueError naming ``name``."""
    value = number(text, name=name)
    if value != int(value) or value < 0:
        raise ValueError(f"{name}: expected a whole number >= 0, got {text!r}")
    return int(value)


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)  # floats only: 10**10**10 overflows at once instead of hanging
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        result = _BINARY[type(node.op)](_evaluate(node.left), _evaluate(node.right))
        if isinstance(result, complex):
            raise ValueError("a negative number to a fractional power")
        return result
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and len(node.args) == 1
        and not node.keywords
    ):
        return _FUNCTIONS[node.func.id](_evaluate(node.args[0]))
    raise ValueError(f"{ast.unparse(node)!r} is not allowed")


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``privacy`` (with ``compose`` and ``calibrate``) to ``subparsers``; each sets ``func=run``."""
    privacy = subparsers.add_parser(
        "privacy",
        help="privacy accounting: compose per-step costs, calibrate a per-step epsilon",
        description="Privacy accounting with the basic, advanced (Dwork-Rothblum-Vadhan), optimal "
        "(Kairouz-Oh-Viswanath) and zCDP composition theorems.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    privacy.set_defaults(func=run, privacy_command=None)
    commands = privacy.add_subparsers(dest="privacy_command", metavar="COMMAND")

    compose = commands.add_parser(
        "compose",
        help="the total (eps, delta) of COUNT steps of EPSILON-DP",
        description="Print the total (eps, delta) of COUNT steps, each EPSILON-DP (or "
        "(EPSILON, STEP_DELTA)-DP), composed by THEOREM. Numbers may be expressions "
        "such as 0.01/sqrt(5*200).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    compose.add_argument("--epsilon", required=True, metavar="E", help="per-step epsilon (> 0)")
    compose.add_argument("--count", required=True, metavar="K", help="number of steps (integer >= 0)")
    _common(compose)
    compose.add_argument(
        "--step-delta", default="0", metavar="D0", help="per-step delta for (E, D0)-DP steps (default 0; not with zcdp)"
    )
    compose.set_defaults(func=run)

    calibrate = commands.add_parser(
        "calibrate",
        help="the largest per-step epsilon that keeps COUNT steps within a total",
        description="Print the largest per-step epsilon such that COUNT steps composed by THEOREM "
        "stay within TOTAL_EPSILON.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    calibrate.add_argument("--total-epsilon", required=True, metavar="E", help="the total epsilon (> 0)")
    calibrate.add_argument("--count", required=True, metavar="K", help="number of steps (integer >= 1)")
    _common(calibrate)
    calibrate.set_defaults(func=run)
    return privacy


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--delta",
        metavar="D",
        help="the theorem's delta in (0, 1): slack of advanced, "
        "total target of optimal, conversion delta of zcdp (not needed by basic)",
    )
    parser.add_argument(
        "--theorem",
        default="advanced",
        choices=(*accountant.THEOREMS, "all"),
        help="composition theorem (default: advanced, as in the paper); all: compare them",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def run(args: argparse.Namespace) -> int:
    """Run ``privacy compose`` or ``privacy calibrate``; 0 on success, 2 on bad input."""
    command = getattr(args, "privacy_command", None)
    if command not in ("compose", "calibrate"):
        print(
            "marketplace privacy: choose a command: compose or calibrate (marketplace privacy --help)", file=sys.stderr
        )
        return EXIT_USAGE
    try:
        rows = _compose(args) if command == "compose" else _calibrate(args)
    except (ValueError, TypeError) as err:
        print(f"marketplace privacy {command}: {err}", file=sys.stderr)
        return EXIT_USAGE
    texts = [row.pop("text") for row in rows]
    if args.json:
        print(json.dumps(rows if args.theorem == "all" else rows[0], indent=2))
    else:
        print("\n".join(texts))
    return EXIT_OK


def _theorems(args: argparse.Namespace) -> tuple[str, ...]:
    return accountant.THEOREMS if args.theorem == "all" else (args.theorem,)


def _delta_for(args: argparse.Namespace, theorem: str) -> float | None:
    if args.delta is None:
        if theorem != "basic":
            raise ValueError(f"--delta is required by the {theorem} theorem")
        return None
    delta = number(args.delta, name="--delta")
    if not 0 < delta < 1:
        raise ValueError(f"--delta: expected a number in (0, 1), got {args.delta!r}")
    return None if theorem == "basic" else delta


def _compose(args: argparse.Namespace) -> list[dict[str, Any]]:
    eps0 = positive(args.epsilon, name="--epsilon")
    count = integer(args.count, name="--count")
    delta0 = number(getattr(args, "step_delta", 0) or 0, name="--step-delta")
    if not 0 <= delta0 < 1:
        raise ValueError(f"--step-delta: expected a number in [0, 1), got {args.step_delta!r}")
    rows = []
    for theorem in _theorems(args):
        if theorem == "zcdp" and delta0 > 0 and args.theorem == "all":
            continue
        delta = _delta_for(args, theorem)
        total = accountant.compose(eps0, count, theorem=theorem, delta=delta, delta0=delta0)
        step = f"{eps0:g}" + (f" (delta {delta0:g})" if delta0 else "")
        text = (
            f"epsilon = {total.eps:#.3g} ({theorem} composition of {count} steps of {step}, delta = {total.delta:.3g})"
        )
        rows.append(
            {
                "epsilon": total.eps,
                "delta": total.delta,
                "theorem": theorem,
                "count": count,
                "step_epsilon": eps0,
                "step_delta": delta0,
                "theorem_delta": delta,
                "text": text,
            }
        )
    return rows


def _calibrate(args: argparse.Namespace) -> list[dict[str, Any]]:
    total = positive(args.total_epsilon, name="--total-epsilon")
    count = integer(args.count, name="--count")
    rows = []
    for theorem in _theorems(args):
        delta = _delta_for(args, theorem)
        eps0 = accountant.calibrate(total, count, 0.0 if delta is None else delta, theorem)
        text = (
            f"step epsilon = {eps0:#.4g} (largest with {count} steps within epsilon {total:g} "
            f"by {theorem} composition" + ("" if delta is None else f", delta = {delta:g}") + ")"
        )
        rows.append(
            {
                "step_epsilon": eps0,
                "total_epsilon": total,
                "count": count,
                "theorem": theorem,
                "theorem_delta": delta,
                "text": text,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    """``python -m marketplace.cli.privacy privacy compose ...`` (also used by the tests)."""
    parser = argparse.ArgumentParser(prog="marketplace")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
